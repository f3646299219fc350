"""Robot Framework keywords for the self-healing tests
(tests/robot/recovery_fs.robot): keep-alive clients that fetch static files
in the background, every body checked byte for byte against the site
manifest, while the test makes a component fault; afterwards, how many
requests failed and the longest time without a completed response.

Plain sockets and http.client, as WebClient: what is sent is what the test
says.
"""

import hashlib
import http.client
import threading
import time

from robot.api import logger
from robot.api.deco import keyword, library

HOST = "127.0.0.1"


def _manifest(path):
    files = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 4 and parts[0] == "file":
                files[parts[1]] = (int(parts[2]), parts[3])
    return files


@library(scope="SUITE", auto_keywords=False)
class RecoveryClient:
    """Background load on 127.0.0.1:PORT and what it saw."""

    def __init__(self, port=8080):
        self.port = int(port)
        self.threads = []
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.done = []      # monotonic times of completed, correct responses
        self.failures = []  # (time, what)
        self.marks = {}

    def _check(self, files, path, status, headers, body):
        if status != 200:
            return f"GET {path}: status {status}"
        size, digest = files[path]
        if headers.get("content-length") != str(size):
            return f"GET {path}: Content-Length {headers.get('content-length')}, want {size}"
        got = hashlib.sha256(body).hexdigest()
        if len(body) != size or got != digest:
            return f"GET {path}: {len(body)} bytes sha256 {got}, want {size} {digest}"
        return None

    @keyword
    def start_static_load(self, manifest, clients, *paths, timeout=30):
        """`clients` threads, each on its own keep-alive connection, fetch
        `paths` round-robin until `Stop Static Load`. Every body is checked
        against the manifest (size and SHA-256); a wrong body, a status
        other than 200, a connection the server closed or reset, or no
        answer within `timeout` seconds, each is a failed request (the
        client then reconnects). A short `timeout` suits a fault of the
        TCP stack: a connection it held may simply end, without a reset."""
        timeout = float(timeout)
        files = _manifest(manifest)
        for p in paths:
            if p not in files:
                raise AssertionError(f"{p} is not in the manifest")
        self.stop.clear()
        self.done, self.failures, self.marks, self.opened = [], [], {}, []
        self.counts = [0] * int(clients)
        self.probes = []

        def run(i, conn):
            k = i
            opened = time.monotonic()
            while not self.stop.is_set():
                p = paths[k % len(paths)]
                k += 1
                try:
                    if conn is None:
                        opened = time.monotonic()
                        conn = http.client.HTTPConnection(HOST, self.port, timeout=timeout)
                    conn.request("GET", p)
                    r = conn.getresponse()
                    body = r.read()
                    headers = {h.lower(): v for h, v in r.getheaders()}
                    wrong = self._check(files, p, r.status, headers, body)
                    now = time.monotonic()
                    with self.lock:
                        if wrong:
                            self.failures.append((now, f"client {i}: {wrong}", opened))
                        else:
                            self.done.append(now)
                            self.opened.append((now, opened))
                            self.counts[i] += 1
                    if wrong or headers.get("connection", "").lower() == "close":
                        conn.close()
                        conn = None
                except Exception as e:  # noqa: BLE001 - every failure counts
                    with self.lock:
                        self.failures.append((time.monotonic(), f"client {i}: GET {p}: {e!r}", opened))
                    if conn is not None:
                        conn.close()
                    conn = None
                    time.sleep(0.05)
            if conn is not None:
                conn.close()

        self.threads = []
        # Connected one after another: QEMU's user networking accepts from
        # a backlog of 1 (see WebClient.concurrent_clients).
        for i in range(int(clients)):
            conn = http.client.HTTPConnection(HOST, self.port, timeout=timeout)
            conn.connect()
            t = threading.Thread(target=run, args=(i, conn), daemon=True)
            self.threads.append(t)
            t.start()
        self.t0 = time.monotonic()

    @keyword
    def start_connection_probe(self, manifest, path, interval_ms=50, timeout=2):
        """Besides the load: a fresh connection every `interval_ms` until
        `Stop Static Load`, each fetching `path` (checked against the
        manifest) and closing. Measures when *new* connections are served,
        whatever the load's keep-alive clients notice of a fault (a TCP
        stack's fault ends its connections without a word to their peers:
        those clients notice only at their timeout or their peer's
        retransmission). `Stop Static Load` reports, per mark, the first
        probe started after it that was served and the probes started after
        it that failed."""
        files = _manifest(manifest)
        self.probes = []  # (started, finished, ok)

        def probe():
            started = time.monotonic()
            ok = False
            try:
                conn = http.client.HTTPConnection(HOST, self.port, timeout=float(timeout))
                try:
                    conn.request("GET", path)
                    r = conn.getresponse()
                    body = r.read()
                    ok = self._check(files, path, r.status, {h.lower(): v for h, v in r.getheaders()}, body) is None
                finally:
                    conn.close()
            except Exception:  # noqa: BLE001 - a failed probe is the measurement
                ok = False
            with self.lock:
                self.probes.append((started, time.monotonic(), ok))

        def run():
            # Each probe on a thread of its own: one that waits for its
            # timeout does not hold the next ones back.
            while not self.stop.is_set():
                threading.Thread(target=probe, daemon=True).start()
                time.sleep(float(interval_ms) / 1000)

        t = threading.Thread(target=run, daemon=True)
        self.threads.append(t)
        t.start()

    @keyword
    def fetch_file_exact(self, manifest, path):
        """GET `path` on a fresh connection; it must be 200 with the
        manifest's size and SHA-256."""
        files = _manifest(manifest)
        conn = http.client.HTTPConnection(HOST, self.port, timeout=30)
        try:
            conn.request("GET", path)
            r = conn.getresponse()
            body = r.read()
            wrong = self._check(files, path, r.status, {h.lower(): v for h, v in r.getheaders()}, body)
        finally:
            conn.close()
        if wrong:
            raise AssertionError(wrong)

    @keyword
    def mark_load_time(self, name):
        """Remembers the current time as `name` (e.g. the fault)."""
        self.marks[name] = time.monotonic()

    @keyword
    def stop_static_load(self):
        """Stops the clients; returns a dict: requests (correct ones),
        failed, gap_ms (the longest interval without a completed correct
        response, from the start to the stop), gap_at_ms (when it began,
        from the start), and per mark the gap that contains it."""
        t_stop = time.monotonic()
        self.stop.set()
        for t in self.threads:
            t.join(timeout=60)
        with self.lock:
            done = sorted(x for x in self.done if x <= t_stop)
            failures = list(self.failures)
        # From the start of the clock (all clients connected) to the stop;
        # responses completed while the clients were still connecting count
        # in `requests` only.
        edges = [self.t0] + [x for x in done if x >= self.t0] + [t_stop]
        gap, at = 0.0, self.t0
        for a, b in zip(edges, edges[1:]):
            if b - a > gap:
                gap, at = b - a, a
        result = {
            "requests": len(done),
            "failed": len(failures),
            "gap_ms": round(gap * 1000),
            "gap_at_ms": round((at - self.t0) * 1000),
            "seconds": round(t_stop - self.t0, 1),
            "per_client": list(self.counts),
        }
        for name, t in self.marks.items():
            before = [x for x in edges if x <= t]
            after = [x for x in edges if x > t]
            if before and after:
                result[f"gap_around_{name}_ms"] = round((after[0] - before[-1]) * 1000)
            # The longest interval without a completed response among those
            # that overlap [mark - 0.5 s, mark + 2 s]: the service gap the
            # event at the mark caused (gap_ms, over the whole run, also
            # counts the host's own stalls: the machine is shared).
            near = [b - a for a, b in zip(edges, edges[1:]) if b >= t - 0.5 and a <= t + 2.0]
            result[f"gap_near_{name}_ms"] = round(max(near, default=0.0) * 1000)
            # Connections opened after the mark: their failures, and when
            # the first of them was served.
            result[f"failed_on_connections_opened_after_{name}"] = sum(1 for f in failures if f[2] > t)
            result[f"failed_on_connections_open_at_{name}"] = sum(1 for f in failures if f[2] <= t)
            served = sorted(d for d, o in self.opened if o > t)
            if served:
                result[f"first_new_connection_served_after_{name}_ms"] = round((served[0] - t) * 1000)
            with self.lock:
                probes = sorted(getattr(self, "probes", []))
            if probes:
                logger.info(f"probes around {name}: " + ", ".join(
                    f"{(p[0] - t) * 1000:.0f}..{(p[1] - t) * 1000:.0f}{'' if p[2] else ' failed'}"
                    for p in probes if -500 <= (p[0] - t) * 1000 <= 1500))
                after = [p for p in probes if p[0] > t]
                result[f"probes_failed_after_{name}"] = sum(1 for p in after if not p[2])
                served = sorted(p[1] for p in after if p[2])
                if served:
                    result[f"probe_served_after_{name}_ms"] = round((served[0] - t) * 1000)
                # The longest time between two served probes around the
                # mark: how long new connections were not served.
                ok = sorted(p[1] for p in probes if p[2])
                near = [b - a for a, b in zip(ok, ok[1:]) if b >= t and a <= t + 2.0]
                result[f"probe_gap_near_{name}_ms"] = round(max(near, default=0.0) * 1000)
        logger.info(f"{result}; failures: {[f[1] for f in failures[:10]]}")
        self.result = result
        self.failure_lines = [f[1] for f in failures]
        return result

    @keyword
    def load_should_have_no_failed_requests(self):
        if self.result["failed"]:
            raise AssertionError(f"{self.result['failed']} failed requests: {self.failure_lines[:10]}")
        if min(self.result["per_client"]) == 0:
            raise AssertionError(f"a client got no answer: {self.result['per_client']}")

    @keyword
    def load_result(self):
        """The dict `Stop Static Load` returned."""
        return self.result

    @keyword
    def load_gap_should_be_below(self, ms, mark=None):
        """The longest gap (near `mark`, if given) is below `ms`."""
        key = f"gap_near_{mark}_ms" if mark else "gap_ms"
        if self.result[key] >= int(ms):
            raise AssertionError(f"{key} {self.result[key]} ms >= {ms} ms: {self.result}")
