"""Robot Framework keywords for tests/robot/death.robot and death_fs.robot:
a slow client holds
a response in the guest while the component that produced it dies and is
restarted, and other clients make the restarted one produce other bytes;
and a cgi that resets its fs session in a loop while a client downloads.

The held response must arrive byte-exact, or the connection must be reset:
never with another response's bytes in it.
"""

import hashlib
import re
import socket
import time

from robot.api import logger
from robot.api.deco import keyword, library

HOST = "127.0.0.1"


def _pattern(seed, size):
    """What /cgi-bin/pattern?seed=S&size=N sends as its body
    (cgi::gen::pattern): 16-byte records of the seed and the record's
    offset in hex."""
    seed &= 0xFFFFFFFF
    n = (size + 15) // 16
    return b"".join(b"%08x%08x" % (seed, 16 * i) for i in range(n))[:size]


def _manifest(path):
    """{url path: (size, sha256)} of a site manifest."""
    files = {}
    with open(path) as f:
        for line in f:
            kind, name, size, digest = line.split()
            if kind == "file":
                files[name] = (int(size), digest)
    return files


def _parse(raw):
    """(status, headers, body) of one HTTP/1.1 response with Content-Length."""
    end = raw.find(b"\r\n\r\n")
    if end < 0:
        raise AssertionError(f"no end of header in {len(raw)} bytes: {raw[:200]!r}")
    lines = raw[:end].decode("latin-1").split("\r\n")
    m = re.match(r"HTTP/1\.[01] (\d{3})", lines[0])
    if not m:
        raise AssertionError(f"not a status line: {lines[0]!r}")
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return int(m.group(1)), headers, raw[end + 4:]


def _first_difference(got, want):
    for i, (a, b) in enumerate(zip(got, want)):
        if a != b:
            return i
    return min(len(got), len(want))


@library(scope="SUITE", auto_keywords=False)
class DeathClient:
    """Slow clients and checks of what they finally receive."""

    def __init__(self, port=8080):
        self.port = int(port)
        self.held = None

    @keyword
    def hold_pipeline(self, *paths, rcvbuf=2048, first=256):
        """Opens a connection with a tiny receive buffer (set before connect,
        so the advertised window stays small), pipelines one GET per path
        (the last with Connection: close), reads only `first` bytes and then
        stops reading: what QEMU's host-side socket does not absorb (its send
        buffer takes about 4 MB) stays queued in the guest (httpd,
        netstack's send queue, the NIC's ring)."""
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, int(rcvbuf))
        s.settimeout(30)
        s.connect((HOST, self.port))
        last = len(paths) - 1
        reqs = "".join(
            f"GET {p} HTTP/1.1\r\nHost: t\r\n{'Connection: close' + chr(13) + chr(10) if i == last else ''}\r\n"
            for i, p in enumerate(paths)
        )
        s.sendall(reqs.encode())
        got = b""
        while len(got) < int(first):
            chunk = s.recv(int(first) - len(got))
            if not chunk:
                break
            got += chunk
        if not got.startswith(b"HTTP/1.1 200"):
            raise AssertionError(f"held response does not start with 200: {got[:100]!r}")
        self.held = (s, got, list(paths))
        logger.info(f"holding {len(paths)} responses: {len(got)} bytes read, the rest left unread")

    @keyword
    def held_pipeline_should_be_exact_or_reset(self, manifest, timeout=120):
        """Reads the rest of the `Hold Pipeline` responses and checks every
        byte: the body of a 200 for a static file must have the manifest's
        sha256, that of /cgi-bin/pattern the seed's pattern; 502/503 are
        accepted for CGI requests (the dead cgi's, or while it was down).
        The connection may end early (reset, or closed): what arrived of the
        response in progress must then be a prefix of its exact body. Never
        another response's bytes. Returns the number of exact 200s."""
        s, got, paths = self.held
        self.held = None
        files = _manifest(manifest)
        s.settimeout(float(timeout))
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                got += chunk
        except (ConnectionResetError, socket.timeout) as e:
            logger.info(f"held connection ended with {e!r} after {len(got)} bytes")
        finally:
            s.close()
        exact, pos, statuses = 0, 0, []
        for i, path in enumerate(paths):
            end = got.find(b"\r\n\r\n", pos)
            if end < 0:
                break  # cut short: accepted
            status, headers, _ = _parse(got[pos:end + 4])
            length = int(headers.get("content-length", "0"))
            body = got[end + 4:end + 4 + length]
            statuses.append(status)
            pos = end + 4 + length
            if status in (502, 503) and path.startswith("/cgi-bin/"):
                continue
            if status != 200:
                raise AssertionError(f"held response {i} ({path}): status {status}")
            if path == "/cgi-bin/page":
                # Generated parts vary; the fragments (fs's pages, forwarded
                # by the cgi by reference) must be there, exact, in order.
                ok = len(body) == length
                at = 0
                for name in ("top", "middle", "bottom"):
                    frag = self._get(f"/fragments/{name}.html")
                    size, digest = files[f"/fragments/{name}.html"]
                    if hashlib.sha256(frag).hexdigest() != digest:
                        raise AssertionError(f"/fragments/{name}.html: sha256 differs")
                    p = body.find(frag[:16], at)
                    if p < 0:
                        if ok:
                            raise AssertionError(f"held response {i} ({path}): fragment {name} missing: {body[at:at+64]!r}")
                        break
                    part = body[p:p + len(frag)]
                    if part != frag[:len(part)] or (ok and len(part) != len(frag)):
                        n = _first_difference(part, frag)
                        raise AssertionError(
                            f"held response {i} ({path}): fragment {name} differs at byte {n}: {part[n:n+32]!r}")
                    at = p + len(frag)
            elif path.startswith("/cgi-bin/pattern"):
                q = dict(kv.split("=") for kv in path.split("?", 1)[1].split("&"))
                want = _pattern(int(q["seed"]), int(q["size"]))
                if length != len(want):
                    raise AssertionError(f"held response {i} ({path}): Content-Length {length}")
                n = _first_difference(body, want)
                if n < len(body):
                    raise AssertionError(
                        f"held response {i} ({path}): body byte {n} differs "
                        f"(got {body[n:n+32]!r}, want {want[n:n+32]!r}); {len(body)} of {length} bytes")
                ok = len(body) == len(want)
            else:
                size, digest = files[path]
                if length != size:
                    raise AssertionError(f"held response {i} ({path}): Content-Length {length}, file {size}")
                ok = len(body) == size
                if ok and hashlib.sha256(body).hexdigest() != digest:
                    raise AssertionError(f"held response {i} ({path}): {size} bytes, sha256 differs")
                if not ok:
                    # Cut short: nothing to hash against; the fresh copy
                    # fetched below must start with these bytes.
                    fresh = self._get(path)
                    if hashlib.sha256(fresh).hexdigest() != digest or not fresh.startswith(body):
                        n = _first_difference(body, fresh)
                        raise AssertionError(f"held response {i} ({path}): cut-short body differs at byte {n}")
            if not ok:
                break
            exact += 1
        logger.info(f"held responses: statuses {statuses}, {exact} exact, {len(got)} bytes")
        if exact == 0:
            raise AssertionError(f"no held response arrived whole: {statuses}")
        return exact

    @keyword
    def fetch_pattern_exact(self, seed, size):
        """GET /cgi-bin/pattern?seed=S&size=N on a fresh connection; the
        body must be that seed's pattern."""
        body = self._get(f"/cgi-bin/pattern?seed={int(seed)}&size={int(size)}")
        want = _pattern(int(seed), int(size))
        if body != want:
            n = _first_difference(body, want)
            raise AssertionError(f"pattern {seed}: {len(body)} bytes, first difference at {n}: {body[n:n+32]!r}")

    @keyword
    def fetch_file_exact(self, manifest, path):
        """GET a static file; its body must have the manifest's sha256."""
        size, digest = _manifest(manifest)[path]
        body = self._get(path)
        if len(body) != size or hashlib.sha256(body).hexdigest() != digest:
            raise AssertionError(f"{path}: {len(body)} bytes, sha256 differs")

    def _get(self, path, attempts=40):
        last = None
        for _ in range(attempts):
            with socket.create_connection((HOST, self.port), timeout=30) as s:
                s.sendall(f"GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".encode())
                raw = b""
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    raw += chunk
            status, headers, body = _parse(raw)
            if status == 200:
                length = int(headers.get("content-length", len(body)))
                if len(body) != length:
                    raise AssertionError(f"{path}: {len(body)} body bytes, Content-Length {length}")
                return body
            last = status
            if status not in (502, 503):
                break
            time.sleep(0.25)  # the cgi is being restarted
        raise AssertionError(f"{path}: status {last}")

    @keyword
    def crash_requests(self, count, seconds):
        """`count` GET /cgi-bin/crash spread over `seconds`; returns the
        statuses seen (502 while the cgi crashes, 503 while it is down)."""
        count, seconds = int(count), float(seconds)
        statuses = {}
        start = time.monotonic()
        for i in range(count):
            try:
                with socket.create_connection((HOST, self.port), timeout=10) as s:
                    s.sendall(b"GET /cgi-bin/crash HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
                    raw = s.recv(64)
                m = re.match(rb"HTTP/1\.[01] (\d{3})", raw)
                st = m.group(1).decode() if m else "close"
            except OSError as e:
                st = type(e).__name__
            statuses[st] = statuses.get(st, 0) + 1
            delay = start + seconds * (i + 1) / count - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        logger.info(f"crash requests: {statuses}")
        return statuses

    @keyword
    def fs_resets_under_static_load(self, manifest, requests, rounds, reset_paths, *static_paths):
        """While one keep-alive client downloads `static_paths` round-robin
        (every body's length and SHA-256 against the manifest), GETs
        `/cgi-bin/fsreset?rounds=R&path=P` `requests` times (the cgi reads
        the files `reset_paths`, comma-separated, keeps every buffer and
        resets its fs session, R times per request) and reads fs's
        `pool_pages_in_use` from /cgi-bin/stats between them. Each report
        must have read every file byte-exact (its SHA-256 is the
        manifest's, every round alike) without an error. Returns a dict:
        `static` (responses), `released` and `waited` (the reports' sums),
        `max_pages` (the most fs pool pages in use seen, by the cgi after
        each reset or in the stats), `pages` (the stats samples)."""
        import http.client
        import json
        import threading

        requests, rounds = int(requests), int(rounds)
        files = _manifest(manifest)
        stop = threading.Event()
        done, errors = [0], []

        def download():
            conn = None
            k = 0
            while not stop.is_set():
                path = static_paths[k % len(static_paths)]
                k += 1
                try:
                    if conn is None:
                        conn = http.client.HTTPConnection(HOST, self.port, timeout=60)
                    conn.request("GET", path)
                    r = conn.getresponse()
                    body = r.read()
                    size, digest = files[path]
                    if r.status != 200 or len(body) != size or hashlib.sha256(body).hexdigest() != digest:
                        errors.append(f"{path}: status {r.status}, {len(body)} bytes, sha256 differs or length")
                    done[0] += 1
                except Exception as e:  # noqa: BLE001 - every failure counts
                    errors.append(f"{path}: {e!r}")
                    if conn is not None:
                        conn.close()
                    conn = None
                    time.sleep(0.1)
            if conn is not None:
                conn.close()

        def get(path):
            with socket.create_connection((HOST, self.port), timeout=60) as s:
                s.sendall(f"GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".encode())
                raw = b""
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    raw += chunk
            status, _, body = _parse(raw)
            if status != 200:
                raise AssertionError(f"{path}: status {status}: {body[:200]!r}")
            return body

        want = [files[p][1] for p in reset_paths.split(",")]
        thread = threading.Thread(target=download)
        thread.start()
        reports, pages = [], []
        try:
            deadline = time.monotonic() + 30
            while done[0] == 0 and not errors and time.monotonic() < deadline:
                time.sleep(0.05)
            for _ in range(requests):
                body = get(f"/cgi-bin/fsreset?rounds={rounds}&path={reset_paths}").decode()
                report = dict(kv.split("=", 1) for kv in body.split())
                reports.append(report)
                if report.get("sha256", "").split(",") != want:
                    raise AssertionError(f"the resetting cgi read other bytes: {report}, want sha256 {want}")
                for key in ("mismatches", "errors"):
                    if report.get(key) != "0":
                        raise AssertionError(f"fsreset: {key} {report.get(key)}: {report}")
                if int(report["rounds"]) != rounds:
                    raise AssertionError(f"fsreset ran {report['rounds']} rounds, want {rounds}")
                stats = json.loads(get("/cgi-bin/stats?format=json"))
                pages.append(int(stats["fs"]["pool_pages_in_use"]))
        finally:
            stop.set()
            thread.join()
        if errors:
            raise AssertionError(f"{len(errors)} static errors during the resets: {errors[:5]}")
        if done[0] == 0:
            raise AssertionError("the static client got no answer")
        summary = {
            "static": done[0],
            "released": sum(int(r["released"]) for r in reports),
            "waited": sum(int(r["waited"]) for r in reports),
            "max_pages": max(pages + [int(r["max_pages"]) for r in reports]),
            "pages": pages,
        }
        logger.info(f"fs resets under static load: {summary}")
        return summary
