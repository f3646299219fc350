// Live counters: polls /cgi-bin/stats?format=json every second and draws
// the last two minutes on a canvas. No libraries, no external resources.
// JSON: {"schema":1,"uptime_ms":N,"<component>":{"<counter>":N,...},...}
(function () {
  "use strict";
  var URL = "/cgi-bin/stats?format=json", PERIOD = 1000, KEEP = 120;
  var samples = []; // {t, ref, copy, req}
  var prev = null;
  var $ = function (id) { return document.getElementById(id); };
  var status = $("status");

  function comps(j) {
    return Object.keys(j).filter(function (k) { return j[k] && typeof j[k] === "object" && !Array.isArray(j[k]); });
  }
  function total(j, key) {
    return comps(j).reduce(function (s, c) { return s + (j[c][key] || 0); }, 0);
  }
  function get(j, c, k) { return (j[c] && j[c][k]) || 0; }
  function human(n) {
    var u = ["B", "KiB", "MiB", "GiB", "TiB"], i = 0;
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return (i ? n.toFixed(1) : Math.round(n)) + " " + u[i];
  }

  function summary(j) {
    var ref = total(j, "bytes_by_ref_sent"), copy = total(j, "bytes_copied");
    $("t-ref").textContent = human(ref);
    $("t-copy").textContent = human(copy);
    $("t-share").textContent = ref + copy ? (100 * ref / (ref + copy)).toFixed(1) + " %" : "–";
    var hits = get(j, "fs", "cache_hits") + get(j, "httpd", "header_cache_hits") + get(j, "netstack", "checksum_cache_hits");
    $("t-hits").textContent = hits.toLocaleString();
  }

  function tables(j) {
    var box = $("components");
    box.textContent = "";
    comps(j).forEach(function (c) {
      var sec = document.createElement("section"), h = document.createElement("h2"), t = document.createElement("table");
      sec.className = "card";
      h.textContent = c;
      Object.keys(j[c]).forEach(function (k) {
        var tr = t.insertRow(), th = document.createElement("th");
        th.textContent = k.replace(/_/g, "_\u200b"); // break after underscores
        tr.appendChild(th);
        tr.insertCell().textContent = Number(j[c][k]).toLocaleString();
      });
      sec.appendChild(h);
      sec.appendChild(t);
      box.appendChild(sec);
    });
  }

  // Axis layout. Every label is measured before anything is drawn, and
  // the plot gets what the widest leaves: a fixed margin cut the left
  // labels once they grew (a 1280-pixel window showed "88.3 KiB/s" for
  // 488.3 KiB/s). The boxes of the labels drawn are published on the
  // canvas as data-labels, JSON {"width", "height", "labels": [{"text",
  // "x", "y", "w", "h"}]} in CSS pixels from the canvas's top-left corner,
  // so that a test in a real browser checks the geometry this code
  // computed (tests/lib/Browser.py: inside the canvas, no two overlapping).
  var PAD = 4, GAP = 6;

  // The ink box of `text` drawn at (x, y) with the current alignment,
  // vertically centred on y.
  function box(g, text, x, y) {
    var m = g.measureText(text);
    var left = m.actualBoundingBoxLeft, right = m.actualBoundingBoxRight;
    var up = m.actualBoundingBoxAscent, down = m.actualBoundingBoxDescent;
    if (!(up + down > 0)) { // no ink metrics (old browsers): the em box
      up = down = 6;
      left = g.textAlign === "right" ? m.width : g.textAlign === "center" ? m.width / 2 : 0;
      right = m.width - left;
    }
    return { text: text, x: x - left, y: y - up, w: left + right, h: up + down };
  }

  function draw() {
    var cv = $("chart"), dpr = window.devicePixelRatio || 1;
    var w = cv.clientWidth, h = cv.clientHeight;
    if (cv.width !== w * dpr || cv.height !== h * dpr) { cv.width = w * dpr; cv.height = h * dpr; }
    var g = cv.getContext("2d");
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, h);
    var css = getComputedStyle(document.documentElement);
    var line = css.getPropertyValue("--line").trim() || "#ddd", muted = css.getPropertyValue("--muted").trim() || "#666";
    var maxB = 1024, maxR = 4; // floors keep the axis labels whole
    samples.forEach(function (s) { maxB = Math.max(maxB, s.ref, s.copy); maxR = Math.max(maxR, s.req); });
    maxB = nice(maxB); maxR = nice(maxR);
    g.font = "11px system-ui, sans-serif";
    g.textBaseline = "middle";
    var left = [], right = [], i;
    for (i = 0; i <= 4; i++) {
      var r = maxR * i / 4;
      left.push(human(maxB * i / 4) + "/s");
      right.push(r % 1 ? r.toFixed(1) : String(r));
    }
    function widest(texts, align) {
      g.textAlign = align;
      return texts.reduce(function (a, t) { var b = box(g, t, 0, 0); return { w: Math.max(a.w, b.w), h: Math.max(a.h, b.h) }; }, { w: 0, h: 0 });
    }
    var lw = widest(left, "right"), rw = widest(right, "left"), xw = widest(["−2 min", "now"], "center");
    var fh = Math.ceil(Math.max(lw.h, rw.h, xw.h));
    // Margins: the widest label plus a gap to the plot and a pad to the
    // edge; the time labels are centred under the plot's ends.
    var L = Math.ceil(Math.max(PAD + lw.w + GAP, PAD + box(g, "−2 min", 0, 0).w / 2));
    var R = Math.ceil(Math.max(GAP + rw.w + PAD, PAD + box(g, "now", 0, 0).w / 2));
    var T = PAD + Math.ceil(fh / 2), B = Math.ceil(fh / 2) + GAP + fh + PAD;
    var pw = Math.max(1, w - L - R), ph = Math.max(1, h - T - B);
    // Labels every quarter if they fit, else every half, else the ends.
    var step = ph / 4 >= fh + 2 ? 1 : ph / 2 >= fh + 2 ? 2 : 4;
    var boxes = [];
    function label(text, x, y, align) {
      g.textAlign = align;
      g.fillText(text, x, y);
      var b = box(g, text, x, y);
      boxes.push({ text: text, x: +b.x.toFixed(2), y: +b.y.toFixed(2), w: +b.w.toFixed(2), h: +b.h.toFixed(2) });
    }
    g.lineWidth = 1;
    for (i = 0; i <= 4; i++) {
      var y = T + ph - ph * i / 4;
      g.strokeStyle = line; g.beginPath(); g.moveTo(L, y + .5); g.lineTo(L + pw, y + .5); g.stroke();
      if (i % step) continue;
      g.fillStyle = muted;
      label(left[i], L - GAP, y, "right");
      label(right[i], L + pw + GAP, y, "left");
    }
    var ty = h - PAD - fh / 2;
    label("−2 min", L, ty, "center");
    label("now", L + pw, ty, "center");
    cv.dataset.labels = JSON.stringify({ width: w, height: h, labels: boxes });
    function plot(key, max, color) {
      if (samples.length < 2) return;
      g.strokeStyle = color; g.lineWidth = 2; g.beginPath();
      samples.forEach(function (s, k) {
        var x = L + pw * (KEEP - samples.length + k) / (KEEP - 1), y = T + ph - ph * s[key] / max;
        if (k) g.lineTo(x, y); else g.moveTo(x, y);
      });
      g.stroke();
    }
    plot("req", maxR, "#1f8a70");
    plot("copy", maxB, "#c2410c");
    plot("ref", maxB, "#6a3fb5");
  }

  function nice(v) {
    var p = Math.pow(10, Math.floor(Math.log10(v))), m = v / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }

  function poll() {
    var x = new XMLHttpRequest();
    x.open("GET", URL);
    x.timeout = 2000;
    x.onload = function () {
      var j;
      try { j = JSON.parse(x.responseText); } catch (e) { return offline("bad JSON"); }
      var now = { t: j.uptime_ms, ref: total(j, "bytes_by_ref_sent"), copy: total(j, "bytes_copied"), req: get(j, "httpd", "requests") };
      if (prev && now.t > prev.t) {
        var dt = (now.t - prev.t) / 1000;
        samples.push({ ref: Math.max(0, now.ref - prev.ref) / dt, copy: Math.max(0, now.copy - prev.copy) / dt, req: Math.max(0, now.req - prev.req) / dt });
        if (samples.length > KEEP) samples.shift();
      }
      prev = now;
      status.className = "muted";
      status.textContent = "Up " + Math.floor(j.uptime_ms / 1000) + " s; updated " + new Date().toLocaleTimeString() + ".";
      summary(j);
      tables(j);
      draw();
    };
    x.onerror = x.ontimeout = function () { offline("no answer"); };
    x.send();
  }
  function offline(why) {
    status.className = "offline";
    status.textContent = "Server not answering (" + why + "); retrying.";
  }

  window.addEventListener("resize", draw);
  poll();
  setInterval(poll, PERIOD);
})();
