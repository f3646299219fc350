"""Robot Framework keywords for tests/robot/web_http11.robot: HTTP/1.1
request features checked end to end with exact bytes (chunked request
bodies, preconditions, Expect: 100-continue, multipart/byteranges).

Requests are written by hand on plain sockets, so that what goes out is
exactly what the test says (chunk sizes, extensions, trailers, where the
TCP writes split the framing), and responses are parsed strictly from the
raw bytes (a 304 with a body, or bytes between two responses, fail).
curl is used where the brief is "a real client" (chunked upload, waiting
for 100 Continue).
"""

import hashlib
import os
import re
import socket
import subprocess
import time

from robot.api import logger
from robot.api.deco import keyword, library

HOST = "127.0.0.1"

# The echo program's output (components/cgi/src/programs.rs run_echo):
# "method: M\n\nmeta-variables:\nNAME=value\n...\nbody: N bytes (passed
# back by reference)\n" and then the request body itself.
ECHO_TAIL = re.compile(rb"\nbody: (\d+) bytes \(passed back by reference\)\n")


def _read_response(sock, method, buf=b"", timeout=30):
    """Reads one response from `sock` (after `buf`, bytes already read):
    (status, headers, body, rest) with `rest` the bytes after it. Interim
    1xx responses are returned as responses of their own (no body)."""
    sock.settimeout(timeout)
    deadline = time.monotonic() + timeout

    def more():
        if time.monotonic() > deadline:
            raise AssertionError(f"no complete response within {timeout} s: {buf[:300]!r}")
        chunk = sock.recv(65536)
        if not chunk:
            raise AssertionError(f"closed before a complete response: {buf[:300]!r}")
        return chunk

    while b"\r\n\r\n" not in buf:
        buf += more()
    head, buf = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    m = re.fullmatch(r"HTTP/1\.1 (\d{3}) [^\r\n]*", lines[0])
    if not m:
        raise AssertionError(f"not an HTTP/1.1 status line: {lines[0]!r}")
    status = int(m.group(1))
    headers = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or name != name.strip():
            raise AssertionError(f"malformed field line {line!r}")
        name = name.lower()
        if name in headers:
            raise AssertionError(f"field {name} twice")
        headers[name] = value.strip()
    if "transfer-encoding" in headers:
        raise AssertionError(f"responses are never chunked here: {headers}")
    if status < 200 or status in (204, 304) or method == "HEAD":
        length = 0
    else:
        length = int(headers["content-length"])
    while len(buf) < length:
        buf += more()
    return status, headers, buf[:length], buf[length:]


def _sha(data):
    return hashlib.sha256(data).hexdigest()


@library(scope="SUITE", auto_keywords=False)
class Http11:
    """HTTP/1.1 features of the guest's web server on 127.0.0.1:PORT."""

    def __init__(self, port=8080):
        self.port = int(port)
        self.files = {}

    def _connect(self, timeout=30):
        return socket.create_connection((HOST, self.port), timeout=timeout)

    # ---- requests and references ------------------------------------------

    @keyword
    def load_site_manifest(self, manifest):
        """The site's files by size and SHA-256 (build/images/site.manifest)."""
        with open(manifest) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 4 and parts[0] == "file":
                    self.files[parts[1]] = (int(parts[2]), parts[3])
        if not self.files:
            raise AssertionError(f"no files in {manifest}")

    @keyword
    def exchange(self, method, path, headers=None, body=b"", follow=None):
        """One request on a fresh connection, written raw (`headers`: a dict;
        Host and Connection: close are added unless `follow`); returns
        (status, headers, body). With `follow` (a path), a GET of it is
        pipelined behind on the same connection and its response must
        follow the first one's exactly where that one's framing says it
        ends; the follower's body must be the site file (manifest)."""
        headers = dict(headers or {})
        if isinstance(body, str):
            body = body.encode()
        lines = [f"{method} {path} HTTP/1.1", "Host: t"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        if body and not any(k.lower() in ("content-length", "transfer-encoding") for k in headers):
            lines.append(f"Content-Length: {len(body)}")
        if follow is None:
            lines.append("Connection: close")
        raw = ("\r\n".join(lines) + "\r\n\r\n").encode() + body
        if follow is not None:
            raw += f"GET {follow} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".encode()
        with self._connect() as s:
            s.sendall(raw)
            status, h, b, rest = _read_response(s, method)
            if follow is not None:
                st2, h2, b2, rest = _read_response(s, "GET", rest)
                self._check_file(follow, st2, b2)
            if rest:
                raise AssertionError(f"{len(rest)} bytes after the last response: {rest[:100]!r}")
        logger.info(f"{method} {path} {headers} -> {status} {h} ({len(b)} body bytes)")
        return status, h, b

    def _check_file(self, path, status, body):
        size, digest = self.files[path]
        if status != 200 or len(body) != size or _sha(body) != digest:
            raise AssertionError(f"GET {path}: {status}, {len(body)} bytes sha256 {_sha(body)}; want 200, {size} {digest}")

    @keyword
    def body_should_be_the_file(self, body, path):
        """`body` is the whole site file `path` (size and SHA-256 of the manifest)."""
        self._check_file(path, 200, body)

    @keyword
    def get_verified_file(self, path):
        """GET `path`, checked against the manifest: its bytes and headers
        (the reference for ranges, which the manifest cannot check)."""
        status, h, body = self.exchange("GET", path)
        self._check_file(path, status, body)
        return h, body

    @keyword
    def echo_body_should_be(self, output, sent, method="POST"):
        """`output` is /cgi-bin/echo's answer to a `method` request whose
        decoded body was `sent`: the body comes back byte for byte after
        the program's own lines, its length in CONTENT_LENGTH, and no
        transfer coding reached the program."""
        if isinstance(sent, str):
            sent = sent.encode()
        if not output.startswith(f"method: {method}\n".encode()):
            raise AssertionError(f"not the echo of a {method}: {output[:80]!r}")
        m = ECHO_TAIL.search(output)
        if not m:
            raise AssertionError(f"no body line in the echo: {output[:400]!r}")
        env, echoed = output[: m.start()], output[m.end():]
        if int(m.group(1)) != len(sent) or echoed != sent:
            raise AssertionError(
                f"echoed body: {m.group(1)} bytes announced, {len(echoed)} bytes sha256 {_sha(echoed)}; "
                f"sent {len(sent)} bytes sha256 {_sha(sent)}"
            )
        if f"\nCONTENT_LENGTH={len(sent)}\n".encode() not in env:
            raise AssertionError(f"CONTENT_LENGTH is not {len(sent)}: {env!r}")
        if b"TRANSFER_ENCODING" in env:
            raise AssertionError(f"the program saw the transfer coding: {env!r}")
        return env.decode("latin-1")

    # ---- chunked request bodies ---------------------------------------------

    @keyword
    def make_test_body(self, size, seed="iolite"):
        """`size` bytes of deterministic binary data (every byte value, CR,
        LF and chunk-size-like text included)."""
        out = b""
        block = seed.encode()
        while len(out) < int(size):
            block = hashlib.sha256(block).digest()
            out += block + b"\r\n0\r\n\r\n"
        return out[: int(size)]

    @keyword
    def curl_chunked_post(self, path, body, directory):
        """POSTs `body` with curl as `Transfer-Encoding: chunked` (curl
        frames it: -H 'Transfer-Encoding: chunked' --data-binary @file);
        returns (status, response body, curl's verbose trace)."""
        name = os.path.join(directory, "chunked-body.bin")
        with open(name, "wb") as f:
            f.write(body)
        out = os.path.join(directory, "chunked-response.bin")
        r = subprocess.run(
            ["curl", "-sS", "-v", "--http1.1", "-o", out, "-w", "%{http_code}", "-H", "Transfer-Encoding: chunked",
             "-H", "Content-Type: application/octet-stream", "--data-binary", f"@{name}",
             f"http://{HOST}:{self.port}{path}"],
            capture_output=True, timeout=60,
        )
        trace = r.stderr.decode("latin-1")
        logger.info(trace)
        if r.returncode != 0:
            raise AssertionError(f"curl failed ({r.returncode}): {trace[-500:]}")
        if "> Transfer-Encoding: chunked" not in trace or "> Content-Length" in trace:
            raise AssertionError(f"curl did not send a chunked body: {trace}")
        with open(out, "rb") as f:
            return int(r.stdout), f.read(), trace

    @keyword
    def curl_upload(self, path, size, directory, chunked=True):
        """POSTs `size` random bytes with curl (`chunked`: -H
        'Transfer-Encoding: chunked' --data-binary @file, curl frames it;
        else with Content-Length) and returns (status, response body, the
        body's SHA-256 in hex, seconds)."""
        size = int(size)
        body = os.urandom(size)
        name = os.path.join(directory, "upload-body.bin")
        with open(name, "wb") as f:
            f.write(body)
        out = os.path.join(directory, "upload-response.bin")
        args = ["curl", "-sS", "-v", "--http1.1", "-o", out, "-w", "%{http_code}",
                "-H", "Content-Type: application/octet-stream", "--data-binary", f"@{name}"]
        if chunked:
            args += ["-H", "Transfer-Encoding: chunked"]
        t0 = time.monotonic()
        r = subprocess.run(args + [f"http://{HOST}:{self.port}{path}"], capture_output=True, timeout=120)
        seconds = time.monotonic() - t0
        trace = r.stderr.decode("latin-1")
        logger.info("\n".join(line for line in trace.splitlines() if line.startswith(("<", ">", "*"))))
        if r.returncode != 0:
            raise AssertionError(f"curl failed ({r.returncode}): {trace[-500:]}")
        if chunked and ("> Transfer-Encoding: chunked" not in trace or "> Content-Length" in trace):
            raise AssertionError(f"curl did not send a chunked body: {trace[-2000:]}")
        with open(out, "rb") as f:
            return int(r.stdout), f.read(), hashlib.sha256(body).hexdigest(), seconds

    @keyword
    def upload_while_reading_slowly(self, path, size, read_bytes=8192, pause=0.01, rcvbuf=16384):
        """POSTs `size` random bytes chunked (64 KiB chunks) to `path` from
        one thread while this one reads the answer `read_bytes` at a time,
        `pause` seconds apart, through a receive buffer of `rcvbuf` bytes:
        the server's send side fills again and again while the body is
        still coming. The answer must be a chunked 200 with
        `Connection: close` absent; returns (decoded body, the sent body's
        SHA-256, seconds, the sender's error or "")."""
        import threading
        size = int(size)
        body = os.urandom(size)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, int(rcvbuf))
        sock.settimeout(120)
        sock.connect((HOST, self.port))
        head = (f"POST {path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/octet-stream\r\n"
                "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n").encode()
        err = []

        def send():
            try:
                sock.sendall(head)
                for i in range(0, size, 65536):
                    piece = body[i:i + 65536]
                    sock.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n")
                sock.sendall(b"0\r\n\r\n")
            except OSError as e:
                err.append(repr(e))

        t0 = time.monotonic()
        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        raw = b""
        while True:
            chunk = sock.recv(int(read_bytes))
            if not chunk:
                break
            raw += chunk
            time.sleep(float(pause))
        seconds = time.monotonic() - t0
        sender.join(10)
        sock.close()
        if b"\r\n\r\n" not in raw:
            raise AssertionError(f"no response header: {raw[:300]!r} (sender: {err})")
        headpart, rest = raw.split(b"\r\n\r\n", 1)
        lines = headpart.decode("latin-1").split("\r\n")
        logger.info("\n".join(lines))
        if not lines[0].startswith("HTTP/1.1 200 "):
            raise AssertionError(f"status line {lines[0]!r}")
        if "transfer-encoding: chunked" not in [line.lower() for line in lines[1:]]:
            raise AssertionError(f"not chunked: {lines}")
        out, chunks = b"", 0
        while True:
            line, sep, rest = rest.partition(b"\r\n")
            if not sep:
                raise AssertionError(f"cut off after {len(out)} body bytes")
            n = int(line, 16)
            if n == 0:
                if rest != b"\r\n":
                    raise AssertionError(f"bytes after the last chunk: {rest[:100]!r}")
                break
            if len(rest) < n + 2 or rest[n:n + 2] != b"\r\n":
                raise AssertionError(f"bad chunk of {n} after {len(out)} body bytes")
            out += rest[:n]
            rest = rest[n + 2:]
            chunks += 1
        logger.info(f"{len(out)} bytes in {chunks} chunks, {seconds:.1f} s")
        return out, hashlib.sha256(body).hexdigest(), seconds, "".join(err)

    @keyword
    def raw_chunked_post(self, path, body, follow="/file-1k.txt"):
        """POSTs `body` chunked by hand, in odd chunk sizes written in odd
        forms (leading zeros, upper and lower case hex), with chunk
        extensions (token and quoted-string values, several on one line)
        and a trailer section of two fields, the TCP writes split inside
        size lines, inside CRLFs and inside the trailer. A GET of `follow`
        is pipelined right after the trailer's empty line: its response
        must follow (the decoder found the body's end exactly). Returns
        (status, body) of the POST."""
        if isinstance(body, str):
            body = body.encode()
        sizes = [1, 2, 3, 7, 0x3FF, 4096, 0xABC, 13, 17]
        forms = ["{:x};ext", "{:04x}", "{:X};a=b;c=\"quoted; \\\"x\\\"\"", "{:x} ; spaced = tok",
                 "{:x}", "{:X}", "{:x};last-is-long=" + "v" * 40, "{:x}", "{:x}"]
        framed = b""
        pos, i = 0, 0
        while pos < len(body):
            n = min(sizes[i % len(sizes)], len(body) - pos)
            framed += forms[i % len(forms)].format(n).encode() + b"\r\n" + body[pos:pos + n] + b"\r\n"
            pos += n
            i += 1
        framed += b"0;end=1\r\nX-Checksum: " + _sha(body).encode() + b"\r\nX-Trailer-Two:\tvalue\r\n\r\n"
        head = f"POST {path} HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nContent-Type: application/octet-stream\r\n\r\n"
        raw = head.encode() + framed + f"GET {follow} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".encode()
        # Split points: inside the first size line, inside a data CRLF,
        # inside the last-chunk line, inside the trailer and its end.
        cuts = sorted({len(head) + 1, len(head) + 4, len(head) + 9, len(head) + len(framed) // 2,
                       len(head) + len(framed) - 40, len(head) + len(framed) - 3, len(head) + len(framed) - 1})
        with self._connect() as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            last = 0
            for c in cuts + [len(raw)]:
                s.sendall(raw[last:c])
                last = c
                time.sleep(0.05)
            status, h, out, rest = _read_response(s, "POST")
            st2, _, b2, rest = _read_response(s, "GET", rest)
            self._check_file(follow, st2, b2)
            if rest:
                raise AssertionError(f"{len(rest)} bytes after the last response: {rest[:100]!r}")
        logger.info(f"{i} chunks, {len(framed)} framed bytes for {len(body)}; -> {status} {h}")
        return status, out

    # ---- Expect: 100-continue -------------------------------------------------

    @keyword
    def continue_before_body(self, path, body):
        """Sends a POST head with `Expect: 100-continue` and nothing of its
        body; the server must answer exactly `HTTP/1.1 100 Continue` and an
        empty line (and nothing else) before any body byte is sent. Then
        the body goes out and the final response is returned (status, body)."""
        if isinstance(body, str):
            body = body.encode()
        head = (f"POST {path} HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n").encode()
        want = b"HTTP/1.1 100 Continue\r\n\r\n"
        with self._connect() as s:
            s.sendall(head)
            s.settimeout(20)
            got = b""
            while len(got) < len(want):
                chunk = s.recv(len(want) - len(got))
                if not chunk:
                    raise AssertionError(f"closed after {got!r}, before 100 Continue")
                got += chunk
            if got != want:
                raise AssertionError(f"first bytes {got!r}, want {want!r}")
            # Nothing more may come before the body is sent.
            s.settimeout(0.5)
            try:
                extra = s.recv(100)
                raise AssertionError(f"more than the interim response before the body: {extra!r}")
            except socket.timeout:
                pass
            s.sendall(body)
            status, h, out, rest = _read_response(s, "POST")
            if rest:
                raise AssertionError(f"bytes after the response: {rest[:100]!r}")
        return status, out

    @keyword
    def no_continue_for_http10(self, path, body, quiet=2.0):
        """An HTTP/1.0 POST with `Expect: 100-continue`, its body held back
        for `quiet` seconds: nothing may arrive meanwhile (a server MUST NOT
        send a 1xx to an HTTP/1.0 client and MUST ignore the expectation,
        RFC 9110 §15.2, §10.1.1). Then the body goes out; returns (status,
        body) of the response."""
        if isinstance(body, str):
            body = body.encode()
        head = f"POST {path} HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        with self._connect() as s:
            s.sendall(head)
            s.settimeout(float(quiet))
            try:
                early = s.recv(100)
                raise AssertionError(f"the server sent {early!r} before the body (to an HTTP/1.0 client)")
            except socket.timeout:
                pass
            s.sendall(body)
            status, h, out, rest = _read_response(s, "POST")
            if rest:
                raise AssertionError(f"bytes after the response: {rest[:100]!r}")
        return status, out

    @keyword
    def curl_post_expecting_continue(self, path, body, directory, wait=30, chunked=False):
        """curl POSTs `body` (as `Transfer-Encoding: chunked` if `chunked`)
        with `Expect: 100-continue` and waits up to
        `wait` seconds for the 100 before sending the body anyway
        (--expect100-timeout; curl's default is 1 s). Returns (status,
        response body, seconds curl took, curl's verbose trace). Fails if
        curl gave up waiting (it says "Done waiting for 100-continue") or
        if the 100 did not come before the final response."""
        name = os.path.join(directory, "expect-body.bin")
        with open(name, "wb") as f:
            f.write(body)
        out = os.path.join(directory, "expect-response.bin")
        te = ["-H", "Transfer-Encoding: chunked"] if chunked else []
        r = subprocess.run(
            ["curl", "-sS", "-v", "--http1.1", "-o", out, "-w", "%{http_code} %{time_total}", *te,
             "--expect100-timeout", str(wait), "-H", "Expect: 100-continue",
             "-H", "Content-Type: application/octet-stream", "--data-binary", f"@{name}",
             f"http://{HOST}:{self.port}{path}"],
            capture_output=True, timeout=int(wait) + 60,
        )
        trace = r.stderr.decode("latin-1")
        logger.info(trace)
        if r.returncode != 0:
            raise AssertionError(f"curl failed ({r.returncode}): {trace[-500:]}")
        code, seconds = r.stdout.decode().split()
        if "Done waiting for 100-continue" in trace:
            raise AssertionError(f"curl gave up waiting for 100 Continue and sent the body: {trace}")
        statuses = re.findall(r"^< HTTP/1\.1 (\d{3})", trace, re.M)
        if statuses[:1] != ["100"] or len(statuses) != 2:
            raise AssertionError(f"status lines curl saw: {statuses}, want 100 then the final one")
        if "> Expect: 100-continue" not in trace:
            raise AssertionError("curl did not send Expect: 100-continue")
        if chunked != ("> Transfer-Encoding: chunked" in trace):
            raise AssertionError(f"curl's framing is not what was asked (chunked: {chunked})")
        with open(out, "rb") as f:
            return int(code), f.read(), float(seconds), trace

    # ---- ranges ---------------------------------------------------------------

    @keyword
    def multipart_byteranges_should_be(self, headers, body, file_bytes, part_type, *ranges):
        """`body` (with response `headers`) is a multipart/byteranges
        payload (RFC 9110 §14.6) of the inclusive `ranges` ("s-e", in
        order) of `file_bytes`, parsed strictly: each part's delimiter,
        Content-Type (`part_type`, the file's) and Content-Range, exactly
        the range's bytes, then the closing delimiter and nothing after it.
        Returns the number of parts."""
        ctype = headers["content-type"]
        m = re.fullmatch(r"multipart/byteranges; boundary=([0-9A-Za-z'()+_,./:=?-]{1,70})", ctype)
        if not m:
            raise AssertionError(f"Content-Type {ctype!r}")
        boundary = m.group(1).encode()
        if int(headers["content-length"]) != len(body):
            raise AssertionError(f"Content-Length {headers['content-length']}, body {len(body)}")
        size = len(file_bytes)
        pos = 0
        # The preamble is empty; the first delimiter may start with CRLF.
        if body.startswith(b"\r\n"):
            pos = 2
        for spec in ranges:
            s, e = (int(x) for x in spec.split("-"))
            delim = b"--" + boundary + b"\r\n"
            if body[pos:pos + len(delim)] != delim:
                raise AssertionError(f"part {spec}: no delimiter at {pos}: {body[pos:pos + 80]!r}")
            pos += len(delim)
            end = body.index(b"\r\n\r\n", pos)
            fields = {}
            for line in body[pos:end].decode("latin-1").split("\r\n"):
                k, _, v = line.partition(":")
                fields[k.strip().lower()] = v.strip()
            pos = end + 4
            want_cr = f"bytes {s}-{e}/{size}"
            if fields.get("content-range") != want_cr:
                raise AssertionError(f"part {spec}: Content-Range {fields.get('content-range')!r}, want {want_cr!r}")
            if fields.get("content-type") != part_type or set(fields) != {"content-type", "content-range"}:
                raise AssertionError(f"part {spec}: fields {fields}, want Content-Type {part_type!r} and Content-Range")
            data = body[pos:pos + e - s + 1]
            if data != file_bytes[s:e + 1]:
                raise AssertionError(f"part {spec}: bytes sha256 {_sha(data)}, want {_sha(file_bytes[s:e + 1])}")
            pos += e - s + 1
            if body[pos:pos + 2] != b"\r\n":
                raise AssertionError(f"part {spec}: no CRLF after the data: {body[pos:pos + 20]!r}")
            pos += 2
        close = b"--" + boundary + b"--\r\n"
        if body[pos:] != close:
            raise AssertionError(f"after the last part: {body[pos:pos + 100]!r}, want {close!r}")
        return len(ranges)
