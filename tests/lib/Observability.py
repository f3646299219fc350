"""Robot Framework keywords for the access and error logs, /metrics and
/healthz (tests/robot/observability.robot, tests/robot/prometheus_tap.robot).

Real clients: curl for the logged requests, Python's
`prometheus_client.parser` (pinned in python-requirements.txt) for the
exposition, and Debian's `prometheus` for the scrape.
"""

import http.client
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.parse

from prometheus_client.parser import text_string_to_metric_families
from robot.api import logger
from robot.api.deco import keyword, library

# nginx's combined format plus $request_time, as httpd writes it after the
# log component's `[httpd] ` prefix.
COMBINED = re.compile(
    r'^\[httpd\] (?P<addr>\d+\.\d+\.\d+\.\d+|-) - - '
    r'\[(?P<time>\d\d/[A-Z][a-z]{2}/\d{4}:\d\d:\d\d:\d\d \+0000)\] '
    r'"(?P<request>(?:[^"\\]|\\x[0-9A-F]{2})*(?:\.\.\.)?)" (?P<status>\d{3}) (?P<bytes>\d+) '
    r'"(?P<referer>(?:[^"\\]|\\x[0-9A-F]{2})*)" "(?P<agent>(?:[^"\\]|\\x[0-9A-F]{2})*)" '
    r'(?P<rtime>\d+\.\d{3})$'
)
ERROR = re.compile(
    r'^\[httpd\] (?P<time>\d{4}/\d\d/\d\d \d\d:\d\d:\d\d) \[error\] \*(?P<conn>\d+): (?P<cause>[^,]+(?:,[^,]+)*?) '
    r'\((?P<status>\d{3})\), client: (?P<addr>[\d.]+|-), request: "(?P<request>.*)"$'
)
DROPPED = re.compile(r'^\[httpd\] (\d+) access log lines dropped \(rate limit\)$')


def nginx_escape(raw: bytes) -> str:
    """What nginx's escape=default makes of a string."""
    return "".join(f"\\x{b:02X}" if b in (0x22, 0x5C) or b < 0x20 or b > 0x7E else chr(b) for b in raw)


@library(scope="SUITE", auto_keywords=False)
class Observability:
    def __init__(self, host_port="127.0.0.1:8080"):
        host, _, port = str(host_port).rpartition(":")
        self.host, self.port = host or "127.0.0.1", int(port)
        self.poller = None
        self.prom = None

    # ---- plain requests --------------------------------------------------

    def _get(self, path, timeout=30):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            conn.request("GET", path)
            r = conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            conn.close()

    @keyword
    def curl(self, path, *args):
        """Runs curl on `path` with `args`; returns (status, body bytes)."""
        url = f"http://{self.host}:{self.port}{path}"
        out = subprocess.run(["curl", "-sS", "-o", "-", "-w", "\n%{http_code}", *args, url],
                             capture_output=True, timeout=60, check=True).stdout
        body, _, code = out.rpartition(b"\n")
        return int(code), body

    # ---- /healthz --------------------------------------------------------

    @keyword
    def health_should_be_ok(self):
        status, headers, body = self._get("/healthz")
        if (status, body) != (200, b"ok\n"):
            raise AssertionError(f"/healthz: {status} {body!r}")
        if headers.get("cache-control") != "no-store":
            raise AssertionError(f"/healthz: Cache-Control {headers.get('cache-control')}")

    @keyword
    def start_health_poll(self, interval=0.01):
        """Polls /healthz on one keep-alive connection (as a load balancer
        does, faster) in a thread until `Stop Health Poll`."""
        states, stop = [], threading.Event()

        def run():
            conn = None
            while not stop.is_set():
                try:
                    if conn is None:
                        conn = http.client.HTTPConnection(self.host, self.port, timeout=10)
                    conn.request("GET", "/healthz")
                    r = conn.getresponse()
                    state = (r.status, r.read().decode("utf-8", "replace"))
                except (OSError, http.client.HTTPException) as e:
                    state, conn = ("error", type(e).__name__), None
                if not states or states[-1][0] != state:
                    states.append([state, 1])
                else:
                    states[-1][1] += 1
                time.sleep(float(interval))

        t = threading.Thread(target=run, daemon=True)
        t.start()
        self.poller = (t, stop, states)

    @keyword
    def stop_health_poll(self):
        """Stops the poll; returns its states in order as (status, body)."""
        t, stop, states = self.poller
        stop.set()
        t.join(20)
        logger.info("\n".join(f"{n} x {s!r}" for s, n in states))
        return [s for s, _ in states]

    @keyword
    def health_poll_should_have_seen(self, states, component):
        """200 ok, then 503 naming `component` (and nothing but lines of the
        form `name: ...`), then 200 ok again, and no error of the poll."""
        if any(s[0] == "error" for s in states):
            raise AssertionError(f"the poll failed: {states}")
        if states[0] != (200, "ok\n") or states[-1] != (200, "ok\n"):
            raise AssertionError(f"not ok before and after: {states}")
        bad = [s for s in states if s[0] == 503]
        if not bad:
            raise AssertionError(f"never 503: {states}")
        for status, body in bad:
            lines = body.splitlines()
            if not lines or not all(re.match(r"^[a-z_0-9]+: (down \(death \d+, not restarted yet\)|"
                                             r"death \d+ not settled \(settled: \d+\)|held down .*)$", l)
                                    for l in lines):
                raise AssertionError(f"503 body not as documented: {body!r}")
            if not any(l.startswith(f"{component}: ") for l in lines):
                raise AssertionError(f"503 without {component}: {body!r}")
        if any(s[0] not in (200, 503) for s in states):
            raise AssertionError(f"other statuses: {states}")
        return len(bad)

    # ---- the logs --------------------------------------------------------

    @keyword
    def access_line_should_be(self, line, addr, request, status, size, referer, agent):
        """`line` (a console line) is a combined line with exactly these
        fields (`request`, `referer`, `agent` raw, escaped here as nginx
        does; `-` for none; `size` `any`: not checked)."""
        m = COMBINED.match(line)
        if not m:
            raise AssertionError(f"not a combined line: {line!r}")
        esc = lambda s: "-" if s == "-" else nginx_escape(s.encode("utf-8"))
        want = {"addr": addr, "request": esc(request), "status": str(status), "bytes": str(size),
                "referer": esc(referer), "agent": esc(agent)}
        if size == "any":
            del want["bytes"]
        got = {k: m.group(k) for k in want}
        if got != want:
            raise AssertionError(f"{line!r}: {got} != {want}")
        t = time.strptime(m.group("time"), "%d/%b/%Y:%H:%M:%S +0000")
        if abs(time.mktime(t) - time.mktime(time.gmtime())) > 600:
            raise AssertionError(f"time {m.group('time')} is not now (UTC)")
        if float(m.group("rtime")) > 30:
            raise AssertionError(f"request time {m.group('rtime')}")
        return m.groupdict()

    @keyword
    def error_line_should_be(self, line, cause, status, request):
        m = ERROR.match(line)
        if not m:
            raise AssertionError(f"not an error line: {line!r}")
        want = {"cause": cause, "status": str(status), "request": nginx_escape(request.encode())}
        got = {k: m.group(k) for k in want}
        if got != want:
            raise AssertionError(f"{line!r}: {got} != {want}")

    @keyword
    def flood(self, count, agent, path="/file-1k.txt"):
        """`count` requests on keep-alive connections (4 at once) with
        User-Agent `agent`, every response 200 with the same body; returns
        the seconds it took."""
        count = int(count)
        bodies, errors = [], []

        def run(n):
            conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
            try:
                for _ in range(n):
                    conn.request("GET", path, headers={"User-Agent": agent})
                    r = conn.getresponse()
                    bodies.append((r.status, r.read()))
            except Exception as e:  # reported below
                errors.append(e)
            finally:
                conn.close()

        t0 = time.monotonic()
        threads = [threading.Thread(target=run, args=(count // 4 + (i < count % 4),)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.monotonic() - t0
        if errors or len(bodies) != count or len({b for b in bodies}) != 1 or bodies[0][0] != 200:
            raise AssertionError(f"flood: {len(bodies)} of {count}, {len(set(bodies))} distinct, errors {errors[:3]}")
        logger.info(f"{count} requests in {took:.2f} s")
        return took

    @keyword
    def flood_lines_should_be_bounded(self, lines, since, count, agent, seconds):
        """Of the console lines from `since`, those of the flood (its
        agent) plus the dropped counts reported add up to `count`; the
        printed ones fit the rate (50 at once, 50/s, +1 s of slack); and
        the log server dropped nothing of httpd's."""
        lines = lines[int(since):]
        esc = nginx_escape(agent.encode())
        printed = sum(1 for l in lines if COMBINED.match(l) and f'"{esc}"' in l)
        dropped = sum(int(m.group(1)) for m in map(DROPPED.match, lines) if m)
        lost = [l for l in lines if re.match(r"^\[log\] httpd: \d+ lines? dropped", l)]
        logger.info(f"{printed} printed, {dropped} reported dropped, of {count}")
        if lost:
            raise AssertionError(f"the log server lost httpd lines: {lost}")
        if printed + dropped != int(count):
            raise AssertionError(f"{printed} printed + {dropped} dropped != {count}")
        if dropped == 0:
            raise AssertionError("nothing dropped: the flood did not reach the limit")
        bound = 50 + 50 * (float(seconds) + 1)
        if printed > bound:
            raise AssertionError(f"{printed} lines printed in {seconds} s: over {bound}")
        return dropped

    # ---- /metrics --------------------------------------------------------

    @keyword
    def scrape_metrics(self):
        """GET /metrics: checks the Content-Type, parses the exposition
        with prometheus_client's parser; returns {(name, component): value}
        of every sample, and logs the family count."""
        status, headers, body = self._get("/metrics")
        if status != 200:
            raise AssertionError(f"/metrics: {status}")
        ctype = headers.get("content-type", "")
        if not ctype.startswith("text/plain; version=0.0.4"):
            raise AssertionError(f"/metrics: Content-Type {ctype}")
        return self._parse(body.decode("utf-8"))

    def _parse(self, text):
        samples = {}
        names = set()
        for fam in text_string_to_metric_families(text):
            if not fam.name.startswith("iolite_"):
                raise AssertionError(f"family {fam.name}: not iolite_*")
            if not fam.documentation:
                raise AssertionError(f"family {fam.name}: no HELP")
            if fam.type not in ("counter", "gauge"):
                raise AssertionError(f"family {fam.name}: type {fam.type}")
            names.add(fam.name)
            for s in fam.samples:
                if fam.type == "counter" and not s.name.endswith("_total"):
                    raise AssertionError(f"counter sample {s.name} without _total")
                if fam.type == "gauge" and s.name.endswith("_total"):
                    raise AssertionError(f"gauge sample {s.name} with _total")
                key = (s.name, s.labels.get("component", ""))
                if key in samples:
                    raise AssertionError(f"sample {key} twice")
                samples[key] = s.value
        # The raw text too: every family's HELP and TYPE precede its samples.
        seen = set()
        for line in text.splitlines():
            m = re.match(r"^# (HELP|TYPE) (\S+)", line)
            if m:
                seen.add((m.group(1), m.group(2)))
            elif line:
                name = re.match(r"^([a-z_0-9]+)", line).group(1)
                if ("HELP", name) not in seen or ("TYPE", name) not in seen:
                    raise AssertionError(f"sample before its HELP/TYPE: {line}")
        logger.info(f"{len(names)} families, {len(samples)} samples")
        return samples

    @keyword
    def metrics_should_cover_stats(self, samples, stats):
        """Every counter of /cgi-bin/stats?format=json is a sample of
        /metrics (iolite_<name>[_total]{component=...}; the supervisor's
        per-component ones as iolite_component_*), and nothing else is."""
        per = {"deaths_": "iolite_component_deaths_total", "settled_": "iolite_component_deaths_settled_total",
               "late_confirms_": "iolite_component_late_confirms_total", "up_": "iolite_component_up"}
        want = set()
        for comp, counters in stats.items():
            if not isinstance(counters, dict):
                continue
            for name in counters:
                fam = next((f for p, f in per.items() if comp == "supervisor" and name.startswith(p)), None)
                if fam:
                    want.add((fam, name.split("_", 2 if name.startswith("late_") else 1)[-1]))
                    continue
                for s in (f"iolite_{name}_total", f"iolite_{name}"):
                    if (s, comp) in samples:
                        want.add((s, comp))
                        break
                else:
                    raise AssertionError(f"{comp}.{name} of /cgi-bin/stats is not in /metrics")
        got = set(samples) - {("iolite_uptime_seconds", "")}
        if got != want:
            raise AssertionError(f"/metrics has more or fewer samples than /cgi-bin/stats: {sorted(got ^ want)[:10]}")
        return len(want)

    # ---- Prometheus --------------------------------------------------------

    @keyword
    def start_prometheus(self, netns, target, interval="1s"):
        """Debian's prometheus in `netns`, scraping http://`target`/metrics
        every `interval` (job `iolite`), its API on 127.0.0.1:9090 there."""
        exe = shutil.which("prometheus")
        if not exe:
            raise AssertionError("prometheus is not installed (Debian package prometheus; ./iolite setup)")
        d = tempfile.mkdtemp(prefix="iolite-prom-")
        with open(os.path.join(d, "prometheus.yml"), "w") as f:
            f.write(f"global:\n  scrape_interval: {interval}\n  scrape_timeout: {interval}\n"
                    f"scrape_configs:\n  - job_name: iolite\n    static_configs:\n      - targets: ['{target}']\n")
        log = open(os.path.join(d, "prometheus.log"), "w")
        p = subprocess.Popen(["ip", "netns", "exec", netns, exe, f"--config.file={d}/prometheus.yml",
                              f"--storage.tsdb.path={d}/data", "--web.listen-address=127.0.0.1:9090"],
                             stdout=log, stderr=subprocess.STDOUT)
        self.prom = (p, d, netns, log)

    @keyword
    def stop_prometheus(self):
        if not self.prom:
            return
        p, d, _, log = self.prom
        self.prom = None
        p.terminate()
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        log.close()
        with open(os.path.join(d, "prometheus.log")) as f:
            logger.info(f.read()[-4000:])
        shutil.rmtree(d, ignore_errors=True)

    def _query(self, expr):
        _, _, netns, _ = self.prom
        url = "http://127.0.0.1:9090/api/v1/query?query=" + urllib.parse.quote(expr)
        out = subprocess.run(["ip", "netns", "exec", netns, "curl", "-sS", "--max-time", "5", url],
                             capture_output=True, timeout=20)
        if out.returncode != 0:
            return None
        return json.loads(out.stdout)

    @keyword
    def prometheus_query_should_return(self, expr, value, timeout=30):
        """Queries `expr` through Prometheus' HTTP API until its one series
        has `value`; returns the series (its labels and value)."""
        deadline = time.monotonic() + float(timeout)
        last = None
        while time.monotonic() < deadline:
            last = self._query(expr)
            if last and last.get("status") == "success":
                res = last["data"]["result"]
                if len(res) == 1 and float(res[0]["value"][1]) == float(value):
                    logger.info(f"{expr}: {res[0]}")
                    return res[0]
            time.sleep(0.5)
        raise AssertionError(f"{expr}: never {value} within {timeout} s; last answer {last}")
