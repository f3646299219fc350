"""Host-side TCP clients for the network suite (tests/robot/network.robot).

The guest runs examples/netecho/netecho.camkes behind QEMU user networking
(slirp) with `simulate --port H:7 --port S:19`: a connection to 127.0.0.1:H
is slirp's host socket, which slirp relays to the guest's 10.0.2.15:7 as a TCP
connection of its own. So what reaches the guest is always well-formed TCP
from slirp: the host cannot put raw Ethernet frames or forged segments on
the guest's wire. What the host *can* do, and what this library does, is
make slirp produce the awkward cases: connections that send garbage,
connections reset mid-stream (SO_LINGER 0 closes become RSTs towards the
guest), half-open connections (connect, send, vanish without reading),
bursts of connects that are abandoned before the guest answers.

Keywords return values Robot can log; failures raise AssertionError with
the reason.
"""

import hashlib
import json
import os
import socket
import struct
import threading
import time

DEFAULT_HOST = "127.0.0.1"


def host_listen_overflows():
    """The host kernel's count of connections its listening sockets
    dropped or sent through SYN cookies because the accept queue was full
    (TcpExt ListenOverflows). QEMU's port forward listens with a backlog
    of one: a connection it overflows may reach the guest seconds later,
    or never, with no fault of the guest's. None if unreadable."""
    try:
        with open("/proc/net/netstat") as f:
            lines = [line.split() for line in f if line.startswith("TcpExt:")]
        names, values = lines[0], lines[1]
        return int(values[names.index("ListenOverflows")])
    except (OSError, IndexError, ValueError):
        return None


def _recv_exact(sock, n):
    chunks = []
    got = 0
    while got < n:
        data = sock.recv(min(1 << 20, n - got))
        if not data:
            break
        chunks.append(data)
        got += len(data)
    return b"".join(chunks)


class NetClient:
    ROBOT_LIBRARY_SCOPE = "SUITE"

    def __init__(self, host=DEFAULT_HOST):
        self.host = host
        # The one connection the `... Connection` keywords keep open.
        self.held = None

    # ---- helpers ---------------------------------------------------------

    def _connect(self, port, timeout):
        s = socket.create_connection((self.host, int(port)), timeout=float(timeout))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    def _echo_one(self, port, data, timeout, sock=None, head=b""):
        """Sends data and reads the echo concurrently; returns the echo
        (`head`: what was already echoed on `sock`)."""
        s = sock or self._connect(port, timeout)
        received = [head] if head else []
        errors = []

        def reader():
            try:
                while True:
                    chunk = s.recv(1 << 20)
                    if not chunk:
                        return
                    received.append(chunk)
                    if sum(map(len, received)) >= len(data):
                        return
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        t = threading.Thread(target=reader)
        t.start()
        try:
            view = memoryview(data)[len(head):]
            for off in range(0, len(data), 65536):
                s.sendall(view[off:off + 65536])
            s.shutdown(socket.SHUT_WR)
            t.join(float(timeout))
            if t.is_alive():
                raise AssertionError(f"echo timed out after {sum(map(len, received))} of {len(data)} bytes")
            if errors:
                raise AssertionError(f"echo failed: {errors[0]!r}")
        finally:
            s.close()
        return b"".join(received)

    # ---- keywords --------------------------------------------------------

    def wait_for_port(self, port, timeout=60):
        """Waits until a connection to the port is answered by the guest
        (slirp accepts at once; the guest's answer is an echoed byte)."""
        deadline = time.time() + float(timeout)
        last = None
        while time.time() < deadline:
            try:
                if self._echo_one(port, b"?", 5) == b"?":
                    return
            except Exception as e:  # noqa: BLE001
                last = e
            time.sleep(0.5)
        raise AssertionError(f"port {port} does not echo: {last!r}")

    def echo_bytes(self, port, size, connections=1, timeout=120):
        """Echoes `size` random bytes on each of `connections` concurrent
        connections and compares SHA-256. Returns total MB/s (both ways)."""
        size, connections = int(size), int(connections)
        payloads = [os.urandom(size) for _ in range(connections)]
        results = [None] * connections
        failures = []
        # Connect one at a time, each confirmed by the echo of its first
        # byte: slirp's host-forward socket listens with a backlog of 1, so
        # simultaneous connects overflow the host kernel's accept queue and
        # some get reset before they ever reach the guest. The transfers
        # then run concurrently.
        socks = []
        for i in range(connections):
            s = self._connect(port, timeout)
            s.sendall(payloads[i][:1])
            if _recv_exact(s, 1) != payloads[i][:1]:
                raise AssertionError(f"connection {i}: first byte not echoed")
            socks.append(s)

        def run(i):
            try:
                results[i] = self._echo_one(port, payloads[i], timeout, socks[i], payloads[i][:1])
            except Exception as e:  # noqa: BLE001
                failures.append(f"connection {i}: {e}")

        start = time.time()
        threads = [threading.Thread(target=run, args=(i,)) for i in range(connections)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.time() - start
        if failures:
            raise AssertionError("; ".join(failures[:5]))
        for i, (p, r) in enumerate(zip(payloads, results)):
            want, got = hashlib.sha256(p).hexdigest(), hashlib.sha256(r).hexdigest()
            if want != got:
                raise AssertionError(f"connection {i}: sent {len(p)} bytes sha256 {want}, got {len(r)} bytes sha256 {got}")
        return f"{connections} x {size} bytes echoed byte-exact in {elapsed:.2f} s ({connections * size / elapsed / 1e6:.2f} MB/s)"

    def short_connections(self, port, count, timeout=10):
        """`count` connections in a row, each echoing a short message and
        closing; all must succeed. Returns connections per second."""
        count = int(count)
        start = time.time()
        overflows = host_listen_overflows()
        for i in range(count):
            msg = b"connection %d\n" % i
            try:
                got = self._echo_one(port, msg, timeout)
            except Exception as e:  # noqa: BLE001
                now = host_listen_overflows()
                host = "unknown" if None in (now, overflows) else now - overflows
                raise AssertionError(f"connection {i} of {count} failed: {e!r}; "
                                     f"guest counters then: {self._diagnosis(port)}; "
                                     f"host listen overflows meanwhile: {host}") from e
            if got != msg:
                raise AssertionError(f"connection {i} of {count}: sent {msg!r}, got {got!r}")
        elapsed = time.time() - start
        return f"{count} connections in {elapsed:.1f} s ({count / elapsed:.0f}/s)"

    def _diagnosis(self, port):
        """The guest's counters that tell where a stalled connection stuck
        (for failure messages: CI keeps only those), or why none came."""
        try:
            st = self.stats(port)
        except Exception as e:  # noqa: BLE001
            return f"no counters ({e!r})"
        keys = ("connections", "closed", "bytes_echoed", "echo_errors", "tcp_connections",
                "tcp_connections_accepted", "tcp_rx_frames", "tcp_tx_frames", "tcp_wakeups", "tcp_polls",
                "tcp_client_requests", "tcp_client_events", "tcp_events_deferred", "tcp_sends_refused",
                "tcp_accept_deferred", "tcp_syn_dropped_backlog_full", "tcp_tx_deferred", "tcp_tx_withheld",
                "drv_rx_frames", "drv_tx_frames", "drv_irqs", "drv_wakeups_sent", "drv_rx_dropped",
                "drv_rx_ring_empty")
        return {k: st[k] for k in keys if k in st}

    def stats(self, port):
        """The guest's counters: a connection that sends exactly STATS\\n gets
        one JSON line (tcp_echo)."""
        s = self._connect(port, 10)
        try:
            s.sendall(b"STATS\n")
            data = b""
            while not data.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        finally:
            s.close()
        return json.loads(data)

    def garbage_after_connect(self, port, connections=20, size=4096):
        """Connections that send random bytes (including a fake STATS prefix
        and NULs) and close without reading."""
        for i in range(int(connections)):
            s = self._connect(port, 10)
            try:
                s.sendall(b"\x00\xff" * 8 + os.urandom(int(size)))
            finally:
                s.close()

    def reset_storm(self, port, connections=100):
        """Connections closed with SO_LINGER 0 (an RST), some right after
        connect, some mid-transfer with unread echo data."""
        for i in range(int(connections)):
            s = self._connect(port, 10)
            if i % 2:
                try:
                    s.sendall(os.urandom(32768))
                except OSError:
                    pass
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()

    def half_open_connections(self, port, connections=20):
        """Connections that send a little, never read, and are dropped by
        the host with a reset while the guest still has echo data queued;
        plus connects abandoned immediately."""
        socks = []
        for i in range(int(connections)):
            s = self._connect(port, 10)
            s.sendall(os.urandom(100000))
            socks.append(s)
        time.sleep(1)
        for s in socks:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
        for i in range(int(connections)):
            s = socket.socket()
            s.setblocking(False)
            try:
                s.connect((self.host, int(port)))
            except BlockingIOError:
                pass
            s.close()

    def bulk_receive(self, port, message_size, count, timeout=300):
        """Asks the guest's source port for `count` messages of
        `message_size` bytes and receives them; returns MB/s (guest → host),
        after checking the length and the pattern (byte i is i % 251 within
        each message)."""
        message_size, count = int(message_size), int(count)
        s = self._connect(port, timeout)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        total = message_size * count
        pattern = bytes(i % 251 for i in range(message_size))
        try:
            start = time.time()
            s.sendall(b"SEND %d %d\n" % (message_size, count))
            got = 0
            pos = 0
            bad = False
            while True:
                chunk = s.recv(1 << 20)
                if not chunk:
                    break
                # Check the pattern cheaply: compare with the expected window.
                n = len(chunk)
                off = 0
                while off < n:
                    take = min(n - off, message_size - pos)
                    if chunk[off:off + take] != pattern[pos:pos + take]:
                        bad = True
                    pos = (pos + take) % message_size
                    off += take
                got += n
            elapsed = time.time() - start
        finally:
            s.close()
        if got != total:
            raise AssertionError(f"source: got {got} of {total} bytes")
        if bad:
            raise AssertionError("source: data does not match the pattern")
        return total / elapsed / 1e6

    # ---- one connection kept open across keywords --------------------------

    def open_connection(self, port, timeout=30):
        """Opens a connection to `port` and keeps it for the keywords below
        (one at a time)."""
        if self.held is not None:
            raise AssertionError("a connection is already open")
        self.held = self._connect(port, timeout)

    def send_on_connection(self, data, pieces=1, gap=0.3):
        """Sends `data` (a string) `pieces` times, `gap` seconds apart, on the
        open connection: separate segments the guest receives one by one."""
        for i in range(int(pieces)):
            if i:
                time.sleep(float(gap))
            self.held.sendall(data.encode())

    def connection_should_be_closed_by_peer(self, timeout=30):
        """Waits until the guest closes or resets the open connection (what
        it sends meanwhile is read and dropped); then forgets it."""
        s, self.held = self.held, None
        s.settimeout(float(timeout))
        try:
            while s.recv(65536):
                pass
        except ConnectionResetError:
            pass
        except socket.timeout:
            raise AssertionError(f"the connection is still open after {timeout} s")
        finally:
            s.close()

    def close_connection(self):
        """Closes the open connection, if any."""
        if self.held is not None:
            self.held.close()
            self.held = None
