"""Robot Framework keywords for the web server (tests/robot/web.robot).

Plain sockets and urllib only (no third-party HTTP client), so that what is
sent is exactly what the test says: keep-alive and pipelining are written
by hand, the hostile corpus (tests/http-corpus) goes out byte for byte.
"""

import concurrent.futures
import hashlib
import http.client
import json
import os
import re
import socket
import threading
import time

import guest_address
from robot.api import logger
from robot.api.deco import keyword, library


def _recv_until_closed(sock, timeout):
    """Everything the server sends until it closes (or `timeout` passes)."""
    sock.settimeout(timeout)
    data = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return data, True
            data += chunk
    except socket.timeout:
        return data, False
    except ConnectionResetError:
        return data, True


class _Responses:
    """Parses consecutive HTTP/1.x responses from one byte stream."""

    def __init__(self, methods):
        self.methods = list(methods)
        self.data = b""
        self.pos = 0
        self.done = []  # (status, headers dict, body)

    def feed(self, chunk):
        self.data += chunk
        while True:
            end = self.data.find(b"\r\n\r\n", self.pos)
            if end < 0:
                return
            head = self.data[self.pos:end].decode("latin-1")
            lines = head.split("\r\n")
            m = re.match(r"HTTP/1\.[01] (\d{3})", lines[0])
            if not m:
                raise AssertionError(f"not a status line: {lines[0]!r}")
            status = int(m.group(1))
            headers = {}
            for line in lines[1:]:
                k, _, v = line.partition(":")
                headers[k.strip().lower()] = v.strip()
            length = int(headers.get("content-length", "0"))
            index = len([s for s, _, _ in self.done if s >= 200])
            method = self.methods[index] if index < len(self.methods) else "GET"
            if status < 200 or status in (204, 304) or method == "HEAD":
                length = 0
            if len(self.data) < end + 4 + length:
                return
            body = self.data[end + 4:end + 4 + length]
            self.pos = end + 4 + length
            self.done.append((status, headers, body))


def stream_text(size, seed=0):
    """What /cgi-bin/stream?size=N&seed=S sends as its body
    (components/cgi/src/stream.rs): 64-byte lines, the line's offset in
    16 hex digits, a space, 46 times the letter a + (line + seed) mod 26,
    a newline; cut at `size`."""
    size = int(size)
    lines = (size + 63) // 64
    return b"".join(b"%016x " % (i * 64) + bytes([97 + (i + int(seed)) % 26]) * 46 + b"\n" for i in range(lines))[:size]


class _Streamed:
    """Reads one response from a socket as it arrives, with the times at
    which its bytes came: the header, then a body delimited by
    Transfer-Encoding: chunked (decoded, each chunk's size kept), by
    Content-Length, or by the close."""

    def __init__(self, sock, method, t0):
        self.sock, self.method, self.t0 = sock, method, t0
        self.buf = b""
        self.first_byte = None
        self.arrivals = []  # (seconds since t0, body bytes so far)
        self.closed = False

    def _more(self):
        try:
            chunk = self.sock.recv(1 << 20)
        except ConnectionResetError:
            chunk = b""
        now = time.monotonic() - self.t0
        if not chunk:
            self.closed = True
            return None
        if self.first_byte is None:
            self.first_byte = now
        self.buf += chunk
        return now

    def _need(self, n):
        while len(self.buf) < n:
            if self._more() is None:
                return False
        return True

    def _line(self):
        while b"\r\n" not in self.buf:
            if self._more() is None:
                return None
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line

    def read(self):
        while b"\r\n\r\n" not in self.buf:
            if self._more() is None:
                raise AssertionError(f"closed before the end of the header: {self.buf[:200]!r}")
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        body, chunks, complete = b"", [], False

        def got(data):
            nonlocal body
            body += data
            self.arrivals.append((time.monotonic() - self.t0, len(body)))

        if self.method == "HEAD" or status in (204, 304):
            complete = True
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            while True:
                line = self._line()
                if line is None:
                    break
                size = int(line.split(b";")[0], 16)
                if size == 0:
                    complete = self._line() == b""
                    break
                chunks.append(size)
                while size > 0:
                    if not self.buf and self._more() is None:
                        break
                    take = self.buf[:size]
                    self.buf = self.buf[len(take):]
                    size -= len(take)
                    got(take)
                if size > 0 or not self._need(2) or self.buf[:2] != b"\r\n":
                    break
                self.buf = self.buf[2:]
        elif "content-length" in headers:
            want = int(headers["content-length"])
            while len(body) < want:
                if not self.buf and self._more() is None:
                    break
                take = self.buf[:want - len(body)]
                self.buf = self.buf[len(take):]
                got(take)
            complete = len(body) == want
        else:
            while True:
                if self.buf:
                    got(self.buf)
                    self.buf = b""
                if self._more() is None:
                    break
            complete = True
        return {
            "status": status,
            "headers": headers,
            "body": body,
            "chunks": chunks,
            "complete": complete,
            "first_byte_s": self.first_byte,
            "first_body_s": self.arrivals[0][0] if self.arrivals else None,
            "total_s": time.monotonic() - self.t0,
            "arrivals": self.arrivals,
        }


def _methods(request_bytes):
    return [m.decode() for m in re.findall(rb"(?:^|\n)([A-Z]+) \S+ HTTP/", request_bytes)]


class _Site:
    """What each body must be: files by the site manifest's size and
    SHA-256, /cgi-bin/page by its fragments (read from the site folder)
    around the two generated parts, whose shape is known."""

    def __init__(self, manifest, site_dir=None):
        self.files = {}
        with open(manifest) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 4 and parts[0] == "file":
                    self.files[parts[1]] = (int(parts[2]), parts[3])
        if "/index.html" in self.files:
            self.files["/"] = self.files["/index.html"]
        self.page = None
        if site_dir:
            frag = [open(os.path.join(site_dir, "fragments", n), "rb").read() for n in ("top.html", "middle.html", "bottom.html")]
            self.page = re.compile(
                re.escape(frag[0])
                + rb'<p class="meta">Assembled for <code>[^<]*</code> at uptime \d+\.\d{3} s; this is request \d+ of this page\.</p>\n'
                + re.escape(frag[1])
                + rb'<table class="accounting">(?:<tr><th>[^<]*</th><td>[0-9 /]+</td></tr>\n){3}'
                + rb'<tr><th>[^<]*</th><td>[0-9 /]+</td></tr></table>\n'
                + re.escape(frag[2]) + rb"\Z",
                re.S,
            )

    def check(self, path, method, status, headers, body):
        """None if the response is right, else what is wrong."""
        if status != 200:
            return f"{method} {path}: status {status}"
        if path == "/cgi-bin/page" and self.page is not None:
            if method == "GET" and not self.page.match(body):
                return f"GET {path}: body is not the page (fragments + generated parts): {body[:120]!r}...{body[-80:]!r}"
            return None
        if path.split("?", 1)[0] == "/cgi-bin/echo":
            # Echoes the request: its method line, then the environment.
            line = f"method: {method}".encode()
            return None if method == "HEAD" or line in body else f"{method} {path}: no {line!r} in {body[:120]!r}"
        want = self.files.get(path.split("?", 1)[0])
        if want is None:
            return f"{path}: no known content to check the body against"
        size, digest = want
        if headers.get("content-length") != str(size):
            return f"{method} {path}: Content-Length {headers.get('content-length')}, want {size}"
        if method == "HEAD":
            return f"HEAD {path}: {len(body)} body bytes" if body else None
        got = hashlib.sha256(body).hexdigest()
        if len(body) != size or got != digest:
            return f"GET {path}: {len(body)} bytes sha256 {got}, want {size} {digest}; starts {body[:64]!r}"
        return None


@library(scope="SUITE", auto_keywords=False)
class WebClient:
    """Talks HTTP to the guest's web server at PORT or HOST:PORT (guest_address)."""

    def __init__(self, port=8080):
        self.host, self.port = guest_address.parse(port)
        self.background = None
        self.site = None
        self.held = None

    @keyword
    def check_bodies_against_site(self, manifest, site_dir=None):
        """From now on the keywords that make many requests (keep-alive,
        pipelining, load) check every body: site files by the manifest's
        SHA-256, /cgi-bin/page by its fragments in `site_dir`."""
        self.site = _Site(manifest, site_dir)

    def _check(self, path, method, status, headers, body):
        if self.site is None:
            raise AssertionError("Check Bodies Against Site was not called: bodies would go unchecked")
        return self.site.check(path, method, status, headers, body)

    def _connect(self, timeout=20):
        return socket.create_connection((self.host, self.port), timeout=timeout)

    # ---- single requests ------------------------------------------------

    @keyword
    def wait_for_web_server(self, timeout=90):
        """Waits until GET / answers 200."""
        deadline = time.monotonic() + float(timeout)
        last = None
        while time.monotonic() < deadline:
            try:
                status, _, _ = self.fetch("/")
                if status == 200:
                    return
                last = status
            except OSError as e:
                last = e
            time.sleep(1)
        raise AssertionError(f"no 200 from / within {timeout} s (last: {last})")

    @keyword
    def fetch(self, path, method="GET", body=None, headers=None, timeout=30):
        """One request on a fresh connection: (status, headers, body)."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=float(timeout))
        try:
            hdrs = dict(headers or {})
            conn.request(method, path, body=body.encode() if isinstance(body, str) else body, headers=hdrs)
            r = conn.getresponse()
            data = r.read()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, data
        finally:
            conn.close()

    @keyword
    def start_fetch(self, path, method="GET", timeout=30):
        """Starts `Fetch` of `path` in the background (one at a time), so a test
        can make other requests while this one waits; `Finish Fetch` returns
        its result."""
        if self.background is not None:
            raise AssertionError("a background fetch is already running")
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        self.background = (pool, pool.submit(self.fetch, path, method, None, None, timeout))

    @keyword
    def finish_fetch(self, timeout=60):
        """Waits for the request `Start Fetch` started: (status, headers, body).
        Fails if it failed or did not finish within `timeout` seconds."""
        if self.background is None:
            raise AssertionError("no background fetch was started")
        pool, future = self.background
        self.background = None
        try:
            return future.result(timeout=float(timeout))
        finally:
            pool.shutdown(wait=False)

    @keyword
    def fetch_streamed(self, path, method="GET", version="1.1", timeout=60, stop_after=None):
        """One request on a fresh connection, read as it arrives (see
        `_Streamed`): a dictionary with `status`, `headers`, `body`
        (decoded), `chunks` (their sizes), `complete` (the body ended as its
        framing says: last chunk, Content-Length, or the close for a body
        without either), `closed` (the server closed the connection),
        `first_byte_s`, `first_body_s` and `total_s` (seconds from sending
        the request to the first response byte, the first body byte, the
        end) and `arrivals` ((seconds, body bytes so far) per piece).
        `stop_after`: return once that many body bytes came, the connection
        still open in `self.held` (`Finish Held Stream` reads the rest)."""
        sock = self._connect(timeout=float(timeout))
        sock.sendall(f"{method} {path} HTTP/{version}\r\nHost: t\r\n\r\n".encode())
        r = _Streamed(sock, method, time.monotonic())
        if stop_after is not None:
            self.held = r
            return self._read_until(r, int(stop_after))
        self.held = r
        return self.finish_held_stream(timeout)

    def _read_until(self, r, n):
        """Reads into `r` until its buffer holds `n` bytes past the header
        (the raw bytes, framing included)."""
        while b"\r\n\r\n" not in r.buf or len(r.buf.partition(b"\r\n\r\n")[2]) < n:
            if r._more() is None:
                raise AssertionError(f"closed after {len(r.buf)} bytes")
        return len(r.buf)

    @keyword
    def finish_held_stream(self, timeout=60):
        """Reads the rest of the response `Fetch Streamed` held (stop_after):
        the same dictionary. `closed`: the server closed the connection
        (within a second after the body; `trailing`: bytes it sent after
        the body, which must be none)."""
        r, self.held = self.held, None
        r.sock.settimeout(float(timeout))
        try:
            out = r.read()
            if not r.closed:
                r.sock.settimeout(1)
                try:
                    r._more()
                except socket.timeout:
                    pass
            out["trailing"] = r.buf
            out["closed"] = r.closed
            logger.info(
                f"status {out['status']}, {len(out['body'])} body bytes in {len(out['chunks'])} chunks, "
                f"complete {out['complete']}, closed {out['closed']}: first byte after {out['first_byte_s']:.3f} s, "
                f"first body byte after {out['first_body_s']} s, end after {out['total_s']:.3f} s"
            )
            return out
        finally:
            r.sock.close()

    @keyword
    def body_should_be_stream_text(self, body, size, seed=0):
        """`body` is the first `size` bytes of /cgi-bin/stream's text (a
        prefix of it if `size` is larger: a cut-off response), byte for
        byte."""
        want = stream_text(size, seed)[:len(body)]
        if len(body) > int(size) or body != want:
            n = next((i for i, (a, b) in enumerate(zip(body, want)) if a != b), min(len(body), len(want)))
            raise AssertionError(f"{len(body)} bytes (of {size}): first difference at {n}: {body[n:n + 40]!r}, want {want[n:n + 40]!r}")

    @keyword
    def status_of_raw_request(self, raw, timeout=10):
        """Sends `raw` (escapes like \\r\\n are interpreted) on a fresh
        connection; returns the first status, or 'close' if the server
        closed without answering."""
        data = raw.encode("latin-1").decode("unicode_escape").encode("latin-1")
        with self._connect() as s:
            s.sendall(data)
            got, _ = _recv_until_closed(s, float(timeout))
        m = re.match(rb"HTTP/1\.[01] (\d{3})", got)
        return int(m.group(1)) if m else "close"

    @keyword
    def connections_closed_by_the_server(self, count, path="/file-1k.txt"):
        """`count` requests in a row, each on a new connection with
        `Connection: close`, so that the server closes first and its side of
        every connection goes through TIME-WAIT. Every response must be
        complete and byte-exact; fails at the first that is not (a reset,
        a refused connect, a short or wrong body). Returns the rate."""
        count = int(count)
        req = f"GET {path} HTTP/1.1\r\nHost: iolite\r\nConnection: close\r\n\r\n".encode()
        start = time.monotonic()
        for i in range(count):
            try:
                with self._connect(timeout=10) as s:
                    s.sendall(req)
                    got, closed = _recv_until_closed(s, 10.0)
            except OSError as e:
                raise AssertionError(f"connection {i} of {count}: {e!r}") from e
            if not closed:
                raise AssertionError(f"connection {i} of {count}: not closed by the server within 10 s")
            head, sep, body = got.partition(b"\r\n\r\n")
            m = re.match(rb"HTTP/1\.1 (\d{3})", head)
            if not sep or not m:
                raise AssertionError(f"connection {i} of {count}: no whole response, got {got[:80]!r}")
            headers = {}
            for line in head.split(b"\r\n")[1:]:
                k, _, v = line.decode("latin-1").partition(":")
                headers[k.strip().lower()] = v.strip()
            wrong = self._check(path, "GET", int(m.group(1)), headers, body)
            if wrong:
                raise AssertionError(f"connection {i} of {count}: {wrong}")
        elapsed = time.monotonic() - start
        return {"served": count, "seconds": elapsed, "per_second": count / elapsed}

    @keyword
    def every_file_should_be_byte_exact(self, manifest):
        """GETs every file of the site manifest ("file /PATH SIZE SHA256")
        and compares size and SHA-256."""
        n = 0
        with open(manifest) as f:
            for line in f:
                parts = line.split()
                if len(parts) != 4 or parts[0] != "file":
                    continue
                _, path, size, digest = parts
                status, headers, body = self.fetch(path)
                if status != 200:
                    raise AssertionError(f"{path}: status {status}")
                if len(body) != int(size) or hashlib.sha256(body).hexdigest() != digest:
                    raise AssertionError(f"{path}: {len(body)} bytes, sha256 {hashlib.sha256(body).hexdigest()}, want {size} {digest}")
                if headers.get("content-length") != size:
                    raise AssertionError(f"{path}: Content-Length {headers.get('content-length')}")
                n += 1
        logger.info(f"{n} files byte-exact")
        return n

    @keyword
    def stats_json(self):
        """/cgi-bin/stats?format=json, parsed."""
        status, headers, body = self.fetch("/cgi-bin/stats?format=json")
        if status != 200:
            raise AssertionError(f"stats: status {status}")
        if not headers.get("content-type", "").startswith("application/json"):
            raise AssertionError(f"stats: Content-Type {headers.get('content-type')}")
        return json.loads(body)

    @keyword
    def cache_budget_should_follow_the_model(self, stats):
        """fs's cache budget in one /cgi-bin/stats reading is what the
        memory model gives for the charges of the same update
        (components/fs/src/budget.rs): the memory budget less httpd's,
        netstack's and fs's held bytes, in whole pages, within the floor
        and the pool; and the low-water mark is at most the budget."""
        fs = stats["fs"]
        memory, floor = fs["memory_budget"], fs["cache_floor"]
        if memory == 0:
            raise AssertionError("fs.memory_budget is 0: the budget is fixed")
        charged = fs["charged_httpd_now"] + fs["charged_netstack_now"] + fs["charged_fs_held_now"]
        left = max(memory - charged, 0) // 4096 * 4096
        want = max(left, floor)
        got = fs["cache_budget_now"]
        if got != want:
            raise AssertionError(f"cache budget {got}, the model gives {want} (memory {memory}, floor {floor},"
                                 f" charged {charged}: {fs})")
        if fs["cache_budget_low"] > got or fs["cache_budget_low"] < floor:
            raise AssertionError(f"low-water mark {fs['cache_budget_low']} outside [{floor}, {got}]")
        return got

    # ---- persistent connections -------------------------------------------

    @keyword
    def keep_alive_requests(self, count, path="/index.html"):
        """`count` requests one after another on one connection, each
        answered before the next; returns the number of 200s."""
        count = int(count)
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        ok = 0
        try:
            for i in range(count):
                conn.request("GET", path)
                r = conn.getresponse()
                body = r.read()
                wrong = self._check(path, "GET", r.status, {k.lower(): v for k, v in r.getheaders()}, body)
                if wrong:
                    raise AssertionError(f"request {i}: {wrong}")
                if r.getheader("Connection", "").lower() == "close":
                    raise AssertionError(f"request {i}: the server closed the connection")
                ok += 1
            sock = conn.sock
            if sock is None:
                raise AssertionError("the connection did not stay open")
        finally:
            conn.close()
        return ok

    @keyword
    def open_keep_alive_connections(self, count, path="/index.html"):
        """Opens `count` connections and makes one checked request of `path`
        on each; keeps them open for `Keep Alive Connections Should Serve`."""
        self.kept = []
        for _ in range(int(count)):
            conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
            self.kept.append(conn)
            self._kept_request(conn, path)

    @keyword
    def keep_alive_connections_should_serve(self, path="/index.html"):
        """One more checked request of `path` on each connection `Open Keep
        Alive Connections` opened (they must still be open); then closes
        them."""
        kept, self.kept = getattr(self, "kept", []), []
        try:
            for i, conn in enumerate(kept):
                if conn.sock is None:
                    raise AssertionError(f"connection {i} was closed")
                try:
                    self._kept_request(conn, path)
                except (OSError, http.client.HTTPException) as e:
                    raise AssertionError(f"connection {i}: {e!r}") from e
        finally:
            for conn in kept:
                conn.close()
        return len(kept)

    def _kept_request(self, conn, path):
        conn.request("GET", path)
        r = conn.getresponse()
        body = r.read()
        wrong = self._check(path, "GET", r.status, {k.lower(): v for k, v in r.getheaders()}, body)
        if wrong:
            raise AssertionError(wrong)
        if r.getheader("Connection", "").lower() == "close":
            raise AssertionError(f"{path}: the server closed the connection")

    @keyword
    def pipelined_requests(self, *paths):
        """All requests sent at once on one connection (the last with
        Connection: close); returns the statuses and checks the bodies
        arrive in order (each body's length matches its Content-Length)."""
        reqs = []
        for i, p in enumerate(paths):
            method, _, path = p.partition(" ") if " " in p else ("GET", "", p)
            close = "Connection: close\r\n" if i == len(paths) - 1 else ""
            reqs.append((method, f"{method} {path} HTTP/1.1\r\nHost: t\r\n{close}\r\n".encode()))
        with self._connect() as s:
            s.sendall(b"".join(r for _, r in reqs))
            data, closed = _recv_until_closed(s, 30)
        parser = _Responses([m for m, _ in reqs])
        parser.feed(data)
        statuses = [st for st, _, _ in parser.done]
        if len(statuses) != len(paths) or not closed:
            raise AssertionError(f"{len(statuses)} responses of {len(paths)}, closed {closed}: {statuses}")
        for p, (st, h, body) in zip(paths, parser.done):
            method, _, path = p.partition(" ") if " " in p else ("GET", "", p)
            wrong = self._check(path, method, st, h, body)
            if wrong:
                raise AssertionError(wrong)
        return statuses

    def _pipeline_once(self, reqs):
        """Sends `reqs` ((method, path) pairs, the last with Connection:
        close) at once on one connection; every response must come, in
        order, with the right body, and the server must close. Returns the
        number of responses."""
        last = len(reqs) - 1
        close = "Connection: close\r\n"
        raw = b"".join(
            f"{m} {p} HTTP/1.1\r\nHost: t\r\n{close if i == last else ''}\r\n".encode() for i, (m, p) in enumerate(reqs)
        )
        parser = _Responses([m for m, _ in reqs])
        with self._connect() as s:
            s.sendall(raw)
            s.settimeout(30)
            closed = False
            try:
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        closed = True
                        break
                    parser.feed(chunk)
            except socket.timeout:
                pass
            except ConnectionResetError as e:
                raise AssertionError(f"reset after {len(parser.done)} of {len(reqs)} responses: {e!r}")
        for k, ((m, p), (st, h, body)) in enumerate(zip(reqs, parser.done)):
            wrong = self._check(p, m, st, h, body)
            if wrong:
                raise AssertionError(f"response {k + 1} of {len(reqs)}: {wrong}")
        if len(parser.done) != len(reqs):
            tail = parser.data[parser.pos:parser.pos + 200]
            raise AssertionError(f"{len(parser.done)} responses of {len(reqs)} (closed {closed}; "
                                 f"{len(parser.data) - parser.pos} bytes left over: {tail!r})")
        if parser.pos != len(parser.data):
            raise AssertionError(f"{len(parser.data) - parser.pos} bytes after the last response")
        if not closed:
            raise AssertionError("the server did not close after Connection: close (stalled?)")
        return len(parser.done)

    @keyword
    def pipelined_rounds_should_be_byte_exact(self, rounds, count, mode, *paths):
        """`rounds` times, `count` requests pipelined on one connection,
        for `paths` (GET unless "HEAD /path"): `each` pipelines `count`
        requests of every path in turn (one connection per path), `mixed`
        cycles through the paths within one connection. Every response must
        come, byte-exact. Returns the number of responses checked."""
        rounds, count = int(rounds), int(count)
        items = [tuple(p.split(" ", 1)) if " " in p else ("GET", p) for p in paths]
        if mode not in ("each", "mixed"):
            raise AssertionError(f"mode {mode!r}: each or mixed")
        total = 0
        t0 = time.monotonic()
        for r in range(rounds):
            try:
                if mode == "each":
                    for item in items:
                        total += self._pipeline_once([item] * count)
                else:
                    total += self._pipeline_once([items[(r + k) % len(items)] for k in range(count)])
            except AssertionError as e:
                raise AssertionError(f"round {r + 1} of {rounds}: {e}") from None
        logger.info(f"{total} responses byte-exact in {time.monotonic() - t0:.1f} s")
        return total

    # ---- load ------------------------------------------------------------

    @keyword
    def concurrent_clients(self, clients, seconds, paths="/index.html /file-16k.bin /style.css /cgi-bin/page"):
        """`clients` threads, each with its own keep-alive connection,
        request the paths round-robin for `seconds`; any error or non-200
        fails. Returns a summary dict.

        The connections are opened one after another (each client starts
        at once) and the clock starts when the last is open: QEMU's user
        networking accepts forwarded connections from a listen() backlog of
        1, so the host kernel drops most of 32 simultaneous SYNs and the
        clients' connects back off for seconds (1, 3, 7, 15, 31 s: past a
        30 s timeout), whatever the guest does.
        (`ss -ltn` shows the backlog; `nstat TcpExtListenOverflows` counts.)"""
        clients, seconds = int(clients), float(seconds)
        paths = paths.split()
        errors = []
        counts = [0] * clients
        lock = threading.Lock()

        # The clock starts when the last client is connected; until then
        # `stop` is open-ended (a client that idled while the others
        # connected could meet the server's idle timeout).
        stop = [float("inf")]

        def run(i, conn):
            k = i
            while time.monotonic() < stop[0]:
                try:
                    if conn is None:
                        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
                    p = paths[k % len(paths)]
                    k += 1
                    conn.request("GET", p)
                    r = conn.getresponse()
                    body = r.read()
                    wrong = self._check(p, "GET", r.status, {k.lower(): v for k, v in r.getheaders()}, body)
                    if wrong:
                        raise AssertionError(wrong)
                    counts[i] += 1
                    if r.getheader("Connection", "").lower() == "close":
                        conn.close()
                        conn = None
                except Exception as e:  # noqa: BLE001 - every failure counts
                    with lock:
                        errors.append(f"client {i}: {e!r}")
                    if conn is not None:
                        conn.close()
                    conn = None
                    time.sleep(0.1)
            if conn is not None:
                conn.close()

        threads = []
        for i in range(clients):
            conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
            conn.connect()
            threads.append(threading.Thread(target=run, args=(i, conn)))
            threads[-1].start()
        t0 = time.monotonic()
        stop[0] = t0 + seconds
        for t in threads:
            t.join()
        elapsed = time.monotonic() - t0
        total = sum(counts)
        summary = {"requests": total, "errors": len(errors), "seconds": round(elapsed, 1), "per_second": round(total / elapsed, 1)}
        logger.info(f"{summary}; first errors: {errors[:5]}")
        if errors:
            raise AssertionError(f"{len(errors)} errors in {total} requests: {errors[:5]}; "
                                 f"counters afterwards: {self._counters_for_diagnosis()}")
        if min(counts) == 0:
            raise AssertionError(f"a client got no answer: {counts}")
        return summary

    @keyword
    def cgi_requests_under_static_load(self, clients, path, count):
        """While `clients` keep-alive clients fetch `path` again and again
        (every body byte-checked), makes `count` sequential requests of
        `/cgi-bin/echo?seq=K`, each on a fresh connection, and checks each
        is 200 with its own query in the body. Fails on any CGI error and
        on any static error. Returns the CGI latencies (max, median) and
        the static responses: a figure to log, not a pass mark."""
        clients, count = int(clients), int(count)
        stop = threading.Event()
        errors, done = [], [0] * clients
        lock = threading.Lock()

        def load(i, conn):
            while not stop.is_set():
                try:
                    if conn is None:
                        conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
                    conn.request("GET", path)
                    r = conn.getresponse()
                    body = r.read()
                    wrong = self._check(path, "GET", r.status, {k.lower(): v for k, v in r.getheaders()}, body)
                    if wrong:
                        raise AssertionError(wrong)
                    done[i] += 1
                except Exception as e:  # noqa: BLE001 - every failure counts
                    with lock:
                        errors.append(f"static client {i}: {e!r}")
                    if conn is not None:
                        conn.close()
                    conn = None
                    time.sleep(0.1)
            if conn is not None:
                conn.close()

        threads = []
        for i in range(clients):
            # One after another (slirp's listen backlog of 1).
            conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
            conn.connect()
            threads.append(threading.Thread(target=load, args=(i, conn)))
            threads[-1].start()
        latencies, failures = [], []
        try:
            # The downloads are under way before the first CGI request.
            deadline = time.monotonic() + 30
            while sum(done) < clients and time.monotonic() < deadline:
                time.sleep(0.05)
            for k in range(count):
                t0 = time.monotonic()
                try:
                    status, _, body = self.fetch(f"/cgi-bin/echo?seq={k}", timeout=30)
                except OSError as e:
                    failures.append(f"request {k}: {e!r}")
                    continue
                latencies.append(time.monotonic() - t0)
                if status != 200 or f"QUERY_STRING=seq={k}\n".encode() not in body:
                    failures.append(f"request {k}: {status} {body[:80]!r}")
        finally:
            stop.set()
            for t in threads:
                t.join()
        latencies.sort()
        summary = {
            "cgi_answered": count - len(failures),
            "cgi_max_s": round(latencies[-1], 3) if latencies else None,
            "cgi_median_s": round(latencies[len(latencies) // 2], 3) if latencies else None,
            "static_responses": sum(done),
        }
        logger.info(f"{summary}; static errors: {errors[:5]}")
        if failures:
            raise AssertionError(f"{len(failures)} of {count} CGI requests failed under load: {failures[:5]}")
        if errors:
            raise AssertionError(f"{len(errors)} static errors under load: {errors[:5]}")
        if min(done) == 0:
            raise AssertionError(f"a static client got no answer: {done}")
        return summary

    @keyword
    def open_zero_window_connections(self, count, path="/file-1m.bin", requests=3):
        """Opens `count` connections that each pipeline `requests` GETs of
        `path` and never read them (a 1 KiB receive buffer, set before
        connecting), one after another. On a TAP network that buffer is
        the window the guest sees; through QEMU's user networking the
        host's own buffers take up to ~2 MB first (slirp's socket: Linux
        grows its send buffer), so 3 MiB make the guest see a zero window
        either way. Each is open at the guest before the next starts (its
        first byte is peeked at, not read): slirp's listen backlog of 1
        would drop a SYN sent sooner. They stay open until `Close Zero Window
        Connections`."""
        self.zero_window = getattr(self, "zero_window", [])
        req = f"GET {path} HTTP/1.1\r\nHost: t\r\n\r\n".encode() * int(requests)
        for i in range(int(count)):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
            s.settimeout(30)
            s.connect((self.host, self.port))
            s.sendall(req)
            if not s.recv(1, socket.MSG_PEEK):
                raise AssertionError(f"zero-window connection {i}: closed by the server")
            self.zero_window.append(s)
        logger.info(f"{len(self.zero_window)} zero-window connections open")
        return len(self.zero_window)

    @keyword
    def close_zero_window_connections(self):
        """Closes (resets: their data is unread) every zero-window
        connection; returns how many the server had already closed."""
        gone = 0
        for s in getattr(self, "zero_window", []):
            try:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                s.close()
            except OSError:
                gone += 1
        self.zero_window = []
        return gone

    def _counters_for_diagnosis(self):
        """The network and httpd counters, to tell a lost frame from a stuck
        connection when a load test fails (best effort: the system may be
        the thing that is stuck)."""
        try:
            _, _, body = self.fetch("/cgi-bin/stats?format=json", timeout=10)
            stats = json.loads(body)
            return {name: stats.get(name) for name in ("netdrv", "netstack", "httpd")}
        except Exception as e:  # noqa: BLE001 - diagnosis only
            return f"unavailable ({e!r})"

    # ---- the hostile corpus --------------------------------------------------

    def _corpus_case(self, directory, name, want):
        with open(os.path.join(directory, name), "rb") as f:
            raw = f.read()
        items = want.split(",")
        want_close = items[-1] == "close"
        statuses = [int(x) for x in items if x.isdigit()]
        waits = "wait" in items
        parser = _Responses(_methods(raw) + ["GET"])
        with self._connect() as s:
            s.sendall(raw)
            if waits:
                before = [int(x) for x in items[: items.index("wait")] if x.isdigit()]
                s.settimeout(2.5)
                try:
                    while len(parser.done) < len(before) or len(before) == 0:
                        chunk = s.recv(65536)
                        if not chunk:
                            return f"{name}: closed before the wait"
                        parser.feed(chunk)
                        if len(before) == 0:
                            return f"{name}: got data before the wait"
                except socket.timeout:
                    pass
            deadline = time.monotonic() + (35 if waits else 10)
            closed = False
            s.settimeout(0.5)
            while time.monotonic() < deadline:
                try:
                    chunk = s.recv(65536)
                except socket.timeout:
                    if len(parser.done) >= len(statuses) and not want_close:
                        break
                    continue
                except ConnectionResetError:
                    closed = True
                    break
                if not chunk:
                    closed = True
                    break
                parser.feed(chunk)
            got = [st for st, _, _ in parser.done]
            if got != statuses:
                return f"{name}: statuses {got}, want {statuses} ({want})"
            if closed != want_close:
                return f"{name}: closed {closed}, want {want_close}"
            if not closed:
                # Framing survived: a normal request on the same connection.
                s.sendall(b"GET /index.html HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
                data, _ = _recv_until_closed(s, 10)
                follow = _Responses(["GET"])
                follow.feed(data)
                if [st for st, _, _ in follow.done] != [200]:
                    return f"{name}: follow-up request got {data[:60]!r}"
        return None

    @keyword
    def run_http_corpus(self, directory, parallel=12):
        """Sends every case of tests/http-corpus (expected.tsv) on its own
        connection and checks the outcome grammar (statuses, wait, close;
        a follow-up GET on connections that stay open). Returns the number
        of cases."""
        cases = []
        with open(os.path.join(directory, "expected.tsv")) as f:
            for line in f:
                if not line.strip() or line.startswith("#"):
                    continue
                name, want = line.rstrip("\n").split("\t")[:2]
                cases.append((name, want))
        failures = []
        with concurrent.futures.ThreadPoolExecutor(max_workers=int(parallel)) as pool:
            futures = {pool.submit(self._corpus_case, directory, n, w): n for n, w in cases}
            for fut in concurrent.futures.as_completed(futures):
                try:
                    r = fut.result()
                except Exception as e:  # noqa: BLE001
                    r = f"{futures[fut]}: {e!r}"
                if r:
                    failures.append(r)
        logger.info(f"{len(cases)} cases, {len(failures)} failures")
        if failures:
            raise AssertionError(f"{len(failures)} of {len(cases)} cases failed:\n" + "\n".join(sorted(failures)))
        return len(cases)
