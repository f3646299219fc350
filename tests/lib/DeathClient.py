"""Robot Framework keywords for tests/robot/death.robot: a slow client holds
a response in the guest while the component that produced it dies and is
restarted, and other clients make the restarted one produce other bytes.

The held response must arrive byte-exact, or the connection must be reset:
never with another response's bytes in it.
"""

import re
import socket
import time

from robot.api import logger
from robot.api.deco import keyword, library

HOST = "127.0.0.1"


def _blob(size):
    """What /cgi-bin/blob?size=N sends as its body (the cgi's pattern)."""
    return bytes(i % 251 for i in range(size))


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
    def hold_response(self, path, count=1, rcvbuf=2048, first=256):
        """Opens a connection with a tiny receive buffer (set before connect,
        so the advertised window stays small), pipelines `count` GETs of
        `path` (the last with Connection: close), reads only `first` bytes
        and then stops reading: what QEMU's host-side socket does not absorb
        (its send buffer takes about 4 MB) stays queued in the guest
        (httpd, netstack's send queue, the NIC's ring)."""
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, int(rcvbuf))
        s.settimeout(30)
        s.connect((HOST, self.port))
        count = int(count)
        reqs = [
            f"GET {path} HTTP/1.1\r\nHost: t\r\n{'Connection: close' if i == count - 1 else ''}\r\n\r\n"
            .replace("\r\n\r\n\r\n", "\r\n\r\n")
            for i in range(count)
        ]
        s.sendall("".join(reqs).encode())
        got = b""
        while len(got) < int(first):
            chunk = s.recv(int(first) - len(got))
            if not chunk:
                break
            got += chunk
        if not got.startswith(b"HTTP/1.1 200"):
            raise AssertionError(f"held response does not start with 200: {got[:100]!r}")
        self.held = (s, got, path)
        logger.info(f"holding {path}: {len(got)} bytes read, the rest left unread")

    @keyword
    def held_blobs_should_be_exact_or_reset(self, size, timeout=120):
        """Reads the rest of the held responses and checks each: a 200 must
        carry the exact /cgi-bin/blob body of `size` bytes; 502 and 503 (the
        requests the dead cgi had not answered, or that came while it was
        down) are accepted. A reset (or the server closing early) is
        accepted too: the data path may drop a response it can no longer
        vouch for, but must never deliver other bytes. Returns the number
        of exact 200 responses."""
        s, got, path = self.held
        self.held = None
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
        want = _blob(int(size))
        exact, pos, statuses = 0, 0, []
        while pos < len(got):
            end = got.find(b"\r\n\r\n", pos)
            if end < 0:
                break
            status, headers, _ = _parse(got[pos:end + 4])
            length = int(headers.get("content-length", "0"))
            body = got[end + 4:end + 4 + length]
            statuses.append(status)
            if status == 200:
                n = _first_difference(body, want)
                if n < min(len(body), len(want)) or len(body) > len(want) or length != len(want):
                    raise AssertionError(
                        f"held response {len(statuses)} ({path}): body byte {n} differs "
                        f"(got {body[n:n+32]!r}, want {want[n:n+32]!r}); {len(body)} of {length} bytes"
                    )
                if len(body) == len(want):
                    exact += 1
            elif status not in (502, 503):
                raise AssertionError(f"held response {len(statuses)}: status {status}")
            pos = end + 4 + length
        logger.info(f"held responses: statuses {statuses}, {exact} exact, {len(got)} bytes")
        if exact == 0:
            raise AssertionError(f"no held response arrived whole: {statuses}")
        return exact

    @keyword
    def fetch_blob_exact(self, size):
        """GET /cgi-bin/blob?size=N on a fresh connection; the body must be
        the exact pattern."""
        body = self._get(f"/cgi-bin/blob?size={int(size)}")
        want = _blob(int(size))
        if body != want:
            n = _first_difference(body, want)
            raise AssertionError(f"blob {size}: {len(body)} bytes, first difference at {n}")

    @keyword
    def fetch_echo_exact(self, tag, pad=2000):
        """GET /cgi-bin/echo with a query unique to `tag`, padded so the
        cgi's output takes whole pages; checks the query comes back."""
        query = f"tag={tag}&pad=" + (str(tag) * int(pad))[: int(pad)]
        body = self._get(f"/cgi-bin/echo?{query}")
        if f"QUERY_STRING={query}\n".encode() not in body:
            raise AssertionError(f"echo {tag}: query not echoed exactly ({len(body)} bytes: {body[:200]!r})")

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
