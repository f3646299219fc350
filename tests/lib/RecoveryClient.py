"""Robot Framework keywords for tests/robot/recovery_net.robot: keep-alive
clients fetch byte-checked files while a component of the network path is
made to fault and is restarted.

Each client is a thread with one persistent HTTP/1.1 connection that GETs
the site's files in turn and checks every body against the manifest's
SHA-256. A request fails when its connection breaks (reset, closed, 10 s
without progress), when its status is not 200, or when its body differs;
the client then opens a new connection and goes on. The service gap is the
largest interval in which no client completed a response, from the first
response to the stop.
"""

import hashlib
import socket
import threading
import time

from robot.api import logger
from robot.api.deco import keyword, library

HOST = "127.0.0.1"


def _manifest(path, max_size):
    """[(url path, size, sha256)] of a site manifest, files of at most
    `max_size` bytes."""
    files = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 4 and parts[0] == "file" and 0 < int(parts[2]) <= max_size:
                files.append((parts[1], int(parts[2]), parts[3]))
    return files


class _Conn:
    """One keep-alive connection: request, then status, headers and a
    Content-Length body."""

    def __init__(self, port, timeout):
        self.sock = socket.create_connection((HOST, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def _fill(self):
        data = self.sock.recv(262144)
        if not data:
            raise ConnectionError("closed by the server")
        self.buf += data

    def get(self, path):
        self.sock.sendall(f"GET {path} HTTP/1.1\r\nHost: iolite\r\n\r\n".encode())
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        length = int(headers.get("content-length", "0"))
        while len(self.buf) < length:
            self._fill()
        body, self.buf = self.buf[:length], self.buf[length:]
        return status, headers, body


@library(scope="SUITE")
class RecoveryClient:
    def __init__(self, port):
        self.port = int(port)
        self._threads = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._reset()

    def _reset(self):
        self.done = []  # completion times (monotonic s)
        self.failures = []  # (time, client, path, why)
        self.bytes = 0
        self.started = None

    def _client(self, k, files):
        conn = None
        i = k
        while not self._stop.is_set():
            path, size, digest = files[i % len(files)]
            i += 1
            try:
                if conn is None:
                    conn = _Conn(self.port, self.timeout)
                status, headers, body = conn.get(path)
                if status != 200:
                    raise AssertionError(f"status {status}")
                if len(body) != size or hashlib.sha256(body).hexdigest() != digest:
                    raise AssertionError(f"body of {len(body)} bytes differs from the manifest's")
                with self._lock:
                    self.done.append(time.monotonic())
                    self.bytes += len(body)
                if headers.get("connection", "").lower() == "close":
                    conn.close()
                    conn = None
            except Exception as e:  # noqa: BLE001 - every failure counts
                if self._stop.is_set():
                    break
                with self._lock:
                    self.failures.append((time.monotonic(), k, path, f"{type(e).__name__}: {e}"))
                if conn is not None:
                    conn.close()
                conn = None
                time.sleep(0.05)
        if conn is not None:
            conn.close()

    @keyword
    def start_keep_alive_load(self, clients, manifest, max_size=262144, timeout=10):
        """Starts `clients` threads, each fetching the manifest's files of at
        most `max_size` bytes on one keep-alive connection, every body
        checked."""
        files = _manifest(manifest, int(max_size))
        if not files:
            raise AssertionError(f"no file of at most {max_size} bytes in {manifest}")
        self.timeout = float(timeout)
        self._reset()
        self._stop.clear()
        self.started = time.monotonic()
        self._threads = [threading.Thread(target=self._client, args=(k, files), daemon=True) for k in range(int(clients))]
        for t in self._threads:
            t.start()

    @keyword
    def load_progress(self):
        """Responses completed so far."""
        with self._lock:
            return len(self.done)

    @keyword
    def stop_load(self):
        """Stops the clients; returns a dictionary: `requests` (completed
        byte-exact), `failed`, `bytes`, `gap_ms` (the largest interval
        without a completed response, from the first one to the stop) and
        `gap_at_s` (when it began, seconds after the start),
        `seconds`, and `failures` (one line each)."""
        stopped = time.monotonic()
        self._stop.set()
        for t in self._threads:
            t.join(timeout=self.timeout + 5)
        with self._lock:
            times = sorted(t for t in self.done if t <= stopped)
            failures = [f for f in self.failures if f[0] <= stopped]
            # From the first response on (connecting is not a gap of the
            # service), to the stop.
            edges = (times or [self.started]) + [stopped]
            gaps = [(b - a, a - self.started) for a, b in zip(edges, edges[1:])]
            gap, at = max(gaps)
            result = {
                "requests": len(times),
                "failed": len(failures),
                "bytes": self.bytes,
                "gap_ms": round(gap * 1000, 1),
                "gap_at_s": round(at, 2),
                "seconds": round(stopped - self.started, 2),
                "failures": [f"t={f[0] - self.started:.2f}s client {f[1]} {f[2]}: {f[3]}" for f in failures],
            }
        logger.info(
            f"{result['requests']} responses byte-exact ({result['bytes']} bytes) in {result['seconds']} s, "
            f"{result['failed']} failed, largest gap {result['gap_ms']} ms at {result['gap_at_s']} s"
        )
        for line in result["failures"]:
            logger.info(line)
        return result
