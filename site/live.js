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
    return Object.keys(j).filter(function (k) { return j[k] && typeof j[k] === "object"; });
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

  function draw() {
    var cv = $("chart"), dpr = window.devicePixelRatio || 1;
    var w = cv.clientWidth, h = cv.clientHeight;
    if (cv.width !== w * dpr || cv.height !== h * dpr) { cv.width = w * dpr; cv.height = h * dpr; }
    var g = cv.getContext("2d");
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, h);
    var css = getComputedStyle(document.documentElement);
    var line = css.getPropertyValue("--line").trim() || "#ddd", muted = css.getPropertyValue("--muted").trim() || "#666";
    var L = 64, R = 44, T = 10, B = 22, pw = w - L - R, ph = h - T - B;
    var maxB = 1024, maxR = 4; // floors keep the axis labels whole
    samples.forEach(function (s) { maxB = Math.max(maxB, s.ref, s.copy); maxR = Math.max(maxR, s.req); });
    maxB = nice(maxB); maxR = nice(maxR);
    g.font = "11px system-ui, sans-serif";
    g.lineWidth = 1;
    for (var i = 0; i <= 4; i++) {
      var y = T + ph - ph * i / 4;
      g.strokeStyle = line; g.beginPath(); g.moveTo(L, y + .5); g.lineTo(L + pw, y + .5); g.stroke();
      g.fillStyle = muted; g.textAlign = "right"; g.fillText(human(maxB * i / 4) + "/s", L - 6, y + 4);
      var r = maxR * i / 4;
      g.textAlign = "left"; g.fillText(r % 1 ? r.toFixed(1) : String(r), L + pw + 6, y + 4);
    }
    g.textAlign = "center";
    g.fillText("−2 min", L, h - 6); g.fillText("now", L + pw, h - 6);
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
