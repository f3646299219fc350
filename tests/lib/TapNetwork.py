"""Robot Framework keywords for a real network path: the guest's e1000 on a
TAP device inside a network namespace the suite creates, the host's Linux
TCP stack as its peer (delayed ACKs, window scaling, SACK, timestamps),
instead of QEMU's user networking, which terminates TCP itself.

The namespace (``ip netns add``) holds only ``lo`` and ``tap0`` with
10.0.2.2/24, the address the guests' static configuration names as their
gateway, so the image needs no change: ``Start System In Namespace`` of
QemuSystem boots it there with ``--tap tap0`` and the clients here connect
from a thread that has entered the namespace (setns applies to the calling
thread only). A suite whose other client libraries should reach the
guest there (the recovery suites: WebClient and RecoveryClient at
10.0.2.15:80) calls ``Enter Tap Network``, which moves Robot's own thread
in, and with it every thread and process it starts. No traffic leaves the
namespace; ``Delete Tap Network`` leaves and removes it. Needs root, ``ip`` (iproute2) and /dev/net/tun: without them
the keywords fail and say why.
"""

import ctypes
import hashlib
import json
import os
import re
import socket
import subprocess
import threading
import time

from robot.api import logger
from robot.api.deco import keyword, library

GUEST = "10.0.2.15"
HOST_SIDE = "10.0.2.2/24"
TAP = "tap0"
CLONE_NEWNET = 0x40000000


def _run(*cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")
    return r.stdout


def _setns(fd):
    """Moves the calling thread into the network namespace open at `fd`."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"setns: {os.strerror(errno)}")


def _read_response(sock, buf):
    """One HTTP/1.1 response with Content-Length from `sock` (bytes left
    over from the previous one in `buf`): (status, headers, body, rest)."""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise AssertionError(f"the server closed the connection ({len(buf)} bytes of a header)")
        buf += chunk
    head, _, buf = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    m = re.match(r"HTTP/1\.1 (\d{3})", lines[0])
    if not m:
        raise AssertionError(f"not a status line: {lines[0]!r}")
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    length = int(headers.get("content-length", "-1"))
    if length < 0:
        raise AssertionError(f"no Content-Length: {headers}")
    while len(buf) < length:
        chunk = sock.recv(1 << 20)
        if not chunk:
            raise AssertionError(f"the server closed the connection after {len(buf)} of {length} body bytes")
        buf += chunk
    return int(m.group(1)), headers, buf[:length], buf[length:]


@library(scope="SUITE", auto_keywords=False)
class TapNetwork:
    """Creates and removes the namespace; HTTP clients inside it."""

    def __init__(self):
        self.ns = None
        # The namespace `Enter Tap Network` left (an open descriptor).
        self.home = None

    @keyword
    def create_tap_network(self):
        """Creates a network namespace with tap0 (10.0.2.2/24); returns its name."""
        if os.geteuid() != 0:
            raise AssertionError("TAP tests need root (a network namespace and a TAP device)")
        if not os.path.exists("/dev/net/tun"):
            raise AssertionError("no /dev/net/tun: TAP devices are not available here")
        if self.ns is not None:
            raise AssertionError(f"a TAP network exists already ({self.ns})")
        ns = f"iolite-tap-{os.getpid()}"
        _run("ip", "netns", "add", ns)
        self.ns = ns
        for cmd in (("link", "set", "lo", "up"), ("tuntap", "add", "dev", TAP, "mode", "tap"),
                    ("link", "set", TAP, "up"), ("addr", "add", HOST_SIDE, "dev", TAP)):
            _run("ip", "-n", ns, *cmd)
        logger.info(f"network namespace {ns}: {TAP} {HOST_SIDE}, guest {GUEST}")
        return ns

    @keyword
    def delete_tap_network(self):
        """Leaves the namespace if in it (`Enter Tap Network`), then removes
        it (and tap0 with it). Safe to call twice."""
        self.leave_tap_network()
        ns, self.ns = self.ns, None
        if ns is not None:
            _run("ip", "netns", "del", ns)

    @keyword
    def enter_tap_network(self):
        """Moves the calling thread (Robot's) into the namespace: every
        socket it opens from now on, every thread it starts (a load
        generator's clients) and every process it spawns (QEMU) is there,
        so a suite's ordinary client libraries reach the guest at
        10.0.2.15:80 with the host's Linux TCP stack as their peer. `Leave
        Tap Network` (the suite teardown) returns it.

        Why not QEMU's user networking for such suites: its port forward
        listens with a backlog of one, so clients that reconnect together
        (after a fault fails their requests) overflow the host's accept
        queue: their SYNs wait a second for a retransmission, or go
        through SYN cookies and, when those fail, the client sees a reset
        the guest never sent."""
        if self.ns is None:
            raise AssertionError("no TAP network: Create Tap Network first")
        if self.home is not None:
            raise AssertionError(f"already in the TAP network {self.ns}")
        self.home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        fd = os.open(f"/run/netns/{self.ns}", os.O_RDONLY)
        try:
            _setns(fd)
        except OSError:
            os.close(self.home)
            self.home = None
            raise
        finally:
            os.close(fd)

    @keyword
    def leave_tap_network(self):
        """Returns the calling thread to the namespace it came from (safe
        to call when it is not in the TAP network)."""
        home, self.home = self.home, None
        if home is not None:
            try:
                _setns(home)
            finally:
                os.close(home)

    def _in_ns(self, fn, *args):
        """Runs fn(*args) in a thread that entered the namespace; returns
        its result or raises its exception."""
        if self.ns is None:
            raise AssertionError("no TAP network: Create Tap Network first")
        result = {}

        def body():
            try:
                fd = os.open(f"/run/netns/{self.ns}", os.O_RDONLY)
                try:
                    _setns(fd)
                finally:
                    os.close(fd)
                result["value"] = fn(*args)
            except BaseException as e:  # handed to the caller
                result["error"] = e

        t = threading.Thread(target=body, daemon=True)
        t.start()
        t.join()
        if "error" in result:
            raise result["error"]
        return result.get("value")

    @keyword
    def wait_for_web_server_on_tap(self, timeout=120):
        """Waits until GET / on the guest answers (from inside the namespace)."""
        def probe():
            deadline = time.monotonic() + float(timeout)
            last = None
            while time.monotonic() < deadline:
                try:
                    with socket.create_connection((GUEST, 80), timeout=3) as s:
                        s.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
                        s.settimeout(10)
                        status, _, _, _ = _read_response(s, b"")
                        if status == 200:
                            return
                        last = status
                except (OSError, AssertionError) as e:
                    last = e
                time.sleep(1)
            raise AssertionError(f"no 200 from http://{GUEST}/ within {timeout} s (last: {last})")
        self._in_ns(probe)

    @keyword
    def keep_alive_fetches_on_tap(self, path, count, sha256, within):
        """Fetches `path` `count` times on one keep-alive connection, each
        response read before the next request; every body must have the
        SHA-256 `sha256` and all of them must arrive within `within`
        seconds. A stall detector, not a benchmark: `within` is generous.
        Returns the seconds taken."""
        count, within = int(count), float(within)

        def run():
            start = time.monotonic()
            deadline = start + within
            times = []
            with socket.create_connection((GUEST, 80), timeout=10) as s:
                buf = b""
                for i in range(count):
                    t0 = time.monotonic()
                    left = deadline - t0
                    if left <= 0:
                        raise AssertionError(f"{i} of {count} responses in {within:.0f} s; per response: {times}")
                    s.settimeout(left)
                    s.sendall(f"GET {path} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
                    try:
                        status, headers, body, buf = _read_response(s, buf)
                    except socket.timeout:
                        raise AssertionError(f"response {i} of {count} not complete within {within:.0f} s; "
                                             f"per response before: {times}") from None
                    times.append(round(time.monotonic() - t0, 3))
                    if status != 200:
                        raise AssertionError(f"response {i}: status {status}")
                    if headers.get("connection", "").lower() == "close":
                        raise AssertionError(f"response {i}: the server closed the connection")
                    digest = hashlib.sha256(body).hexdigest()
                    if digest != sha256:
                        raise AssertionError(f"response {i}: {len(body)} bytes with SHA-256 {digest}, want {sha256}")
            return time.monotonic() - start, times
        # Robot takes log messages from its own thread only.
        took, times = self._in_ns(run)
        logger.info(f"{count} x {path} in {took:.2f} s; per response (s): {times}")
        return round(took, 2)

    @keyword
    def open_slow_readers_on_tap(self, count, path):
        """Opens `count` connections with a 2 KiB receive buffer
        (SO_RCVBUF, set before connecting, so that the window the server
        sees stays small: the paper's slow WAN clients), asks each for
        `path` and reads its response header, which must be 200; then they
        read nothing more until `Close Slow Readers`. The server must keep
        their responses queued, each pinning what it pulled for it."""
        count = int(count)

        def run():
            socks = []
            try:
                for i in range(count):
                    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
                    s.settimeout(30)
                    socks.append(s)
                    s.connect((GUEST, 80))
                    s.sendall(f"GET {path} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
                for i, s in enumerate(socks):
                    buf = b""
                    while b"\r\n" not in buf:
                        chunk = s.recv(256)
                        if not chunk:
                            raise AssertionError(f"slow reader {i}: closed before a status line")
                        buf += chunk
                    line = buf.split(b"\r\n", 1)[0].decode("latin-1")
                    if not line.startswith("HTTP/1.1 200"):
                        raise AssertionError(f"slow reader {i} of {count}: {line!r}")
            except BaseException:
                for s in socks:
                    s.close()
                raise
            return socks
        self.slow = getattr(self, "slow", []) + self._in_ns(run)

    @keyword
    def close_slow_readers(self):
        """Closes the connections `Open Slow Readers On Tap` opened."""
        for s in getattr(self, "slow", []):
            s.close()
        self.slow = []

    @keyword
    def stats_on_tap(self):
        """/cgi-bin/stats?format=json, fetched from inside the namespace,
        as a dictionary (component -> counter -> value)."""
        def run():
            with socket.create_connection((GUEST, 80), timeout=10) as s:
                s.sendall(b"GET /cgi-bin/stats?format=json HTTP/1.1\r\nHost: t\r\n\r\n")
                status, _, body, _ = _read_response(s, b"")
                if status != 200:
                    raise AssertionError(f"/cgi-bin/stats: {status}")
                return json.loads(body)
        return self._in_ns(run)

    @keyword
    def manifest_sha256(self, manifest, path):
        """The SHA-256 the site manifest (make-site-image.sh) gives `path`."""
        with open(manifest) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 4 and parts[0] == "file" and parts[1] == path:
                    return parts[3]
        raise AssertionError(f"{path} is not in {manifest}")
