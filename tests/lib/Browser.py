"""Headless Chromium for tests/robot/pages.robot: the pages people look at,
laid out by a real browser at a phone's and a desktop's width, checked
through the DOM over the Chrome DevTools Protocol (Debian's `chromium`,
the `websocket-client` package pinned in python-requirements.txt; no
driver binary, nothing fetched).

What is checked is geometry, not pixels: no element pokes out of the
viewport sideways (unless inside something that scrolls), and the live
chart's axis labels, whose boxes live.js publishes as the canvas's
`data-labels` (see `draw` there), stay inside the canvas and do not
overlap. A background load keeps the counters moving, so the labels show
the wide values (hundreds of KiB/s) that were once cut.
"""

import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.request

import websocket
from robot.api import logger
from robot.api.deco import keyword, library

# Elements sticking out of the viewport, ignoring those inside a box that
# scrolls or clips (a wide table in an `overflow-x: auto` wrapper is fine).
OVERFLOW_JS = r"""
(() => {
  const vw = document.documentElement.clientWidth, bad = [];
  const clipped = (el) => {
    for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
      const o = getComputedStyle(p).overflowX;
      if (o === "auto" || o === "scroll" || o === "hidden") return true;
    }
    return false;
  };
  for (const el of document.body.querySelectorAll("*")) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) continue;
    if ((r.right > vw + 0.5 || r.left < -0.5) && !clipped(el)) {
      bad.push(`${el.tagName.toLowerCase()}${el.id ? "#" + el.id : ""}${el.className ? "." + el.className : ""} ` +
               `[${r.left.toFixed(1)}, ${r.right.toFixed(1)}] "${(el.textContent || "").trim().slice(0, 40)}"`);
    }
  }
  return { vw, scroll: document.documentElement.scrollWidth, bad: bad.slice(0, 20) };
})()
"""


@library(scope="SUITE")
class Browser:
    def __init__(self):
        self._proc = None
        self._ws = None
        self._id = 0
        self._profile = None
        self._load = None

    @keyword
    def start_browser(self):
        """Starts headless Chromium and attaches to its first tab."""
        exe = shutil.which("chromium") or shutil.which("chromium-browser")
        if not exe:
            raise AssertionError("chromium missing (./iolite setup installs it)")
        self._profile = tempfile.mkdtemp(prefix="iolite-chromium.")
        self._proc = subprocess.Popen(
            [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-extensions", "--disable-background-networking", "--hide-scrollbars",
             "--remote-debugging-port=0", "--remote-allow-origins=*",
             f"--user-data-dir={self._profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = os.path.join(self._profile, "DevToolsActivePort")
        deadline = time.time() + 30
        while not os.path.exists(port_file) or not open(port_file).read().strip():
            if time.time() > deadline or self._proc.poll() is not None:
                raise AssertionError("chromium did not open its DevTools port")
            time.sleep(0.1)
        port = open(port_file).read().split()[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            pages = [t for t in json.load(r) if t["type"] == "page"]
        self._ws = websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=30)

    @keyword
    def stop_browser(self):
        self.stop_load()
        if self._ws:
            self._ws.close()
            self._ws = None
        if self._proc:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
            self._proc = None
        if self._profile:
            shutil.rmtree(self._profile, ignore_errors=True)

    def _call(self, method, **params):
        self._id += 1
        self._ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            msg = json.loads(self._ws.recv())
            if msg.get("id") == self._id:
                if "error" in msg:
                    raise AssertionError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def _eval(self, expr):
        r = self._call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise AssertionError(f"{expr[:60]}: {r['exceptionDetails']}")
        return r["result"].get("value")

    @keyword
    def open_page(self, url, width, height=800, ready="true", timeout=30):
        """Loads `url` in a window `width` CSS pixels wide (a phone's touch
        and scale below 600) and waits until the page has loaded and the
        JavaScript condition `ready` holds."""
        width, height = int(width), int(height)
        self._call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                   deviceScaleFactor=3 if width < 600 else 1, mobile=width < 600)
        self._call("Page.navigate", url=url)
        deadline = time.time() + float(timeout)
        while True:
            if self._eval(f"document.readyState === 'complete' && location.href === {json.dumps(url)} && !!({ready})"):
                return
            if time.time() > deadline:
                chart = self._eval("(document.getElementById('chart') || {dataset: {}}).dataset.labels || null")
                raise AssertionError(f"{url} at {width} px: not ready ({ready}) within {timeout} s; chart labels: {chart}")
            time.sleep(0.25)

    @keyword
    def page_should_fit_its_width(self):
        """Nothing sticks out sideways: the page does not scroll
        horizontally and no element leaves the viewport."""
        r = self._eval(OVERFLOW_JS)
        logger.info(f"viewport {r['vw']} px, scroll width {r['scroll']} px")
        if r["scroll"] > r["vw"] or r["bad"]:
            raise AssertionError(f"page {r['scroll']} px wide in a {r['vw']} px viewport; outside it:\n" + "\n".join(r["bad"]))

    @keyword
    def chart_labels_should_fit(self, min_top_label=""):
        """The live chart's axis labels (live.js's data-labels) lie inside
        the canvas, as the browser sized it, and none overlaps another.
        `min_top_label`: a regular expression the top left label must
        match (that the load made the values wide). Returns the labels."""
        r = self._eval("""(() => { const c = document.getElementById("chart");
            return { box: [c.clientWidth, c.clientHeight], labels: c.dataset.labels || null }; })()""")
        if not r["labels"]:
            raise AssertionError("the chart published no label boxes (data-labels)")
        d = json.loads(r["labels"])
        cw, ch = r["box"]
        if [d["width"], d["height"]] != [cw, ch]:
            raise AssertionError(f"labels laid out for {d['width']}x{d['height']}, canvas is {cw}x{ch}")
        labels = d["labels"]
        logger.info(f"canvas {cw}x{ch}: " + "; ".join(f"{b['text']} [{b['x']}, {b['y']}, {b['w']}x{b['h']}]" for b in labels))
        bad = []
        if len(labels) < 4:
            bad.append(f"only {len(labels)} labels")
        for b in labels:
            if b["w"] <= 0 or b["h"] <= 0:
                bad.append(f"{b['text']!r}: empty box")
            if b["x"] < 0 or b["y"] < 0 or b["x"] + b["w"] > cw or b["y"] + b["h"] > ch:
                bad.append(f"{b['text']!r} at [{b['x']}, {b['y']}] {b['w']}x{b['h']} leaves the {cw}x{ch} canvas")
        for i, a in enumerate(labels):
            for b in labels[i + 1:]:
                if a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"] and a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"]:
                    bad.append(f"{a['text']!r} overlaps {b['text']!r}")
        if min_top_label:
            import re
            tops = [b for b in labels if b["text"].endswith("/s")]
            top = min(tops, key=lambda b: b["y"])["text"] if tops else ""
            if not re.fullmatch(min_top_label, top):
                bad.append(f"top left label {top!r} does not match {min_top_label!r} (no load?)")
        if bad:
            raise AssertionError("\n".join(bad))
        return labels

    @keyword
    def start_load(self, url, clients=2):
        """GETs `url` over and over from `clients` threads until Stop Load."""
        stop = threading.Event()
        done = [0]

        def run():
            while not stop.is_set():
                try:
                    with urllib.request.urlopen(url, timeout=30) as r:
                        r.read()
                    done[0] += 1
                except OSError:
                    time.sleep(0.2)

        threads = [threading.Thread(target=run, daemon=True) for _ in range(int(clients))]
        for t in threads:
            t.start()
        self._load = (stop, threads, done)

    @keyword
    def stop_load(self):
        """Stops the load; returns how many requests it completed."""
        if not self._load:
            return 0
        stop, threads, done = self._load
        stop.set()
        for t in threads:
            t.join(35)
        self._load = None
        logger.info(f"load: {done[0]} requests")
        return done[0]
