"""Network attacks on a web server at 10.0.2.15:80 reached through tap0,
for tests/robot/attack_tap.robot (through Attacker.py) and bench/attack.

Run inside the TAP network namespace (the caller's thread has entered it,
or the whole process runs under `unshare --net`): every frame goes out on
tap0 and so only to the guest. Standard library only. Frames are built by
hand (Ethernet, ARP, IPv4, TCP, ICMP) and sent and received on an
AF_PACKET socket bound to tap0: a frame the host transmits on a TAP
device is what the guest receives.

Fake peers: addresses 10.0.2.64-10.0.2.127 that no interface of the host
holds; `Wire` answers the guest's ARP requests for the ones in use with a
made-up MAC (02:00:5e:00:00:NN), so the guest's frames to them reach the
AF_PACKET socket and nothing else (the host's stack drops frames for
another MAC: no reset from it spoils a handshake we do by hand). Spoofed
sources (`syn_burst`) are off-link (198.18.0.0/15): the guest answers them
through its gateway, the host, which forwards nothing and drops them.

One function per case (`CASES`), each runs for about `seconds` and returns
a dictionary of what it did and what it saw. Kernel sockets (the host's
Linux TCP) where the attack is ordinary TCP (trickling, idle, zero-window
clients); hand-made segments where it is not (no handshake completion,
resets before accept, holes, bad checksums, fragments).

As a command (a separate process, so the attack's Python does not take
the normal client's interpreter lock): `python3 attacks.py CASE SECONDS
[MANIFEST]` prints the case's result as one JSON line.
"""

import fcntl
import hashlib
import json
import os
import queue
import random
import resource
import select
import socket
import struct
import subprocess
import sys
import termios
import threading
import time

GUEST = "10.0.2.15"
PORT = 80
IFACE = "tap0"
ETH_P_ALL = 0x0003
ETH_P_IP = 0x0800
ETH_P_ARP = 0x0806
PACKET_OUTGOING = 4
SYN, ACK, RST, FIN, PSH = 0x02, 0x10, 0x04, 0x01, 0x08
# The backlog httpd listens with (components/httpd: Request::Listen).
BACKLOG = 64


def ip_bytes(a):
    return socket.inet_aton(a)


def csum(data):
    """The Internet checksum (RFC 1071) of `data`."""
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def eth(dst, src, ethertype, payload):
    return dst + src + struct.pack("!H", ethertype) + payload


def ipv4(src, dst, proto, payload, ident=0, frag=0, mf=False, df=True, ttl=64, bad_csum=False, total=None):
    """An IPv4 header (no options) before `payload`; `frag` is the
    fragment offset in 8-byte units; `total` overrides the total length
    (a header that claims more than the frame holds)."""
    flags = (0x4000 if df else 0) | (0x2000 if mf else 0) | (frag & 0x1FFF)
    length = total if total is not None else 20 + len(payload)
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, length, ident & 0xFFFF, flags, ttl, proto, 0, ip_bytes(src), ip_bytes(dst))
    c = csum(h)
    if bad_csum:
        c ^= 0x5A5A
    return h[:10] + struct.pack("!H", c) + h[12:] + payload


def tcp(src, dst, sport, dport, seq, ack, flags, window=65535, payload=b"", options=b"", bad_csum=False):
    """A TCP segment with a correct checksum (or a wrong one)."""
    off = (20 + len(options)) // 4
    h = struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, off << 4, flags, window, 0, 0)
    pseudo = ip_bytes(src) + ip_bytes(dst) + struct.pack("!BBH", 0, 6, len(h) + len(options) + len(payload))
    c = csum(pseudo + h + options + payload)
    if bad_csum:
        c ^= 0x1234
    return h[:16] + struct.pack("!H", c) + h[18:] + options + payload


def icmp_echo(ident, seq, payload):
    h = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
    return h[:2] + struct.pack("!H", csum(h + payload)) + h[4:] + payload


MSS_OPTION = struct.pack("!BBH", 2, 4, 1460)


def fake_mac(ip):
    return bytes([0x02, 0x00, 0x5E, 0x00, 0x00, int(ip.rsplit(".", 1)[1])])


class Wire:
    """tap0 as an AF_PACKET socket: sends frames to the guest, answers ARP
    for the fake peers, and hands received TCP segments to whoever waits
    for them (by destination address and port)."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self.sock.bind((IFACE, 0))
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.host_mac = self.sock.getsockname()[4]
        self.fakes = {}  # ip -> mac
        self.queues = {}  # (ip, port) -> Queue of (flags, seq, ack, window, payload)
        self.lock = threading.Lock()
        self.seen = {"syn_acks": 0, "syn_acks_to": {}, "rsts": 0, "icmp_replies": 0, "icmp_bad_replies": 0,
                     "frames_in": 0, "arp_answered": 0}
        self.icmp_sent = {}
        self.guest_mac = None
        self.stop = False
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def close(self):
        self.stop = True
        self.reader.join(timeout=2)
        self.sock.close()

    def add_fake(self, ip):
        with self.lock:
            self.fakes[ip] = fake_mac(ip)
        return self.fakes[ip]

    def send(self, frame):
        if len(frame) < 60:
            frame += bytes(60 - len(frame))
        self.sock.send(frame)

    def send_raw(self, frame):
        """Sends exactly `frame` (runts too)."""
        self.sock.send(frame)

    def resolve_guest(self, via="10.0.2.64", timeout=10):
        """The guest's MAC, from an ARP request of the fake peer `via`."""
        mac = self.add_fake(via)
        req = struct.pack("!HHBBH6s4s6s4s", 1, ETH_P_IP, 6, 4, 1, mac, ip_bytes(via), bytes(6), ip_bytes(GUEST))
        deadline = time.monotonic() + timeout
        while self.guest_mac is None and time.monotonic() < deadline:
            self.send(eth(b"\xff" * 6, mac, ETH_P_ARP, req))
            time.sleep(0.2)
        if self.guest_mac is None:
            raise AssertionError(f"no ARP reply from {GUEST} within {timeout} s")
        return self.guest_mac

    def listen(self, ip, port):
        q = queue.Queue()
        with self.lock:
            self.queues[(ip, port)] = q
        return q

    def unlisten(self, ip, port):
        with self.lock:
            self.queues.pop((ip, port), None)

    def _read(self):
        self.sock.settimeout(0.2)
        while not self.stop:
            try:
                frame, addr = self.sock.recvfrom(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            if addr[2] == PACKET_OUTGOING or len(frame) < 14:
                continue
            self.seen["frames_in"] += 1
            (etype,) = struct.unpack("!H", frame[12:14])
            if etype == ETH_P_ARP and len(frame) >= 42:
                self._arp(frame)
            elif etype == ETH_P_IP and len(frame) >= 34:
                self._ip(frame)

    def _arp(self, frame):
        op, sha, spa, _, tpa = struct.unpack("!6xH6s4s6s4s", frame[14:42])
        sender = socket.inet_ntoa(spa)
        target = socket.inet_ntoa(tpa)
        if sender == GUEST and self.guest_mac is None:
            self.guest_mac = sha
        if op == 1 and sender == GUEST:
            with self.lock:
                mac = self.fakes.get(target)
            if mac is not None:
                rep = struct.pack("!HHBBH6s4s6s4s", 1, ETH_P_IP, 6, 4, 2, mac, tpa, sha, spa)
                self.send(eth(sha, mac, ETH_P_ARP, rep))
                self.seen["arp_answered"] += 1

    def _ip(self, frame):
        ihl = (frame[14] & 0x0F) * 4
        proto = frame[23]
        src, dst = socket.inet_ntoa(frame[26:30]), socket.inet_ntoa(frame[30:34])
        if src != GUEST:
            return
        (total,) = struct.unpack("!H", frame[16:18])
        body = frame[14 + ihl:14 + total]
        if proto == 6 and len(body) >= 20:
            sport, dport, seq, ack, off, flags, window = struct.unpack("!HHIIBBH", body[:16])
            payload = body[(off >> 4) * 4:]
            if flags & SYN and flags & ACK:
                self.seen["syn_acks"] += 1
                self.seen["syn_acks_to"][dst] = self.seen["syn_acks_to"].get(dst, 0) + 1
            if flags & RST:
                self.seen["rsts"] += 1
            with self.lock:
                q = self.queues.get((dst, dport))
            if q is not None:
                q.put((flags, seq, ack, window, payload))
        elif proto == 1 and len(body) >= 8 and body[0] == 0:
            ident, seq = struct.unpack("!HH", body[4:8])
            want = self.icmp_sent.pop((ident, seq), None)
            if want is not None:
                if body[8:] == want:
                    self.seen["icmp_replies"] += 1
                else:
                    self.seen["icmp_bad_replies"] += 1


class RawConn:
    """A TCP connection made by hand from a fake peer: the handshake (or
    part of it), in-order and out-of-order data, a reset, and a receiver
    that acknowledges in-order data and keeps it."""

    def __init__(self, wire, ip, port):
        self.w, self.ip, self.port = wire, ip, port
        self.mac = wire.add_fake(ip)
        self.q = wire.listen(ip, port)
        self.isn = random.getrandbits(32)
        self.snd = self.isn
        self.rcv = None
        self.window = 0
        self.data = bytearray()
        self.fin = False
        self.reset = False

    def close_queue(self):
        self.w.unlisten(self.ip, self.port)

    def _seg(self, seq, flags, payload=b"", ack=None, bad_csum=False, window=65535, options=b""):
        a = self.rcv if ack is None else ack
        seg = tcp(self.ip, GUEST, self.port, PORT, seq, a or 0, flags | (ACK if a is not None else 0),
                  window=window, payload=payload, options=options, bad_csum=bad_csum)
        self.w.send(eth(self.w.guest_mac, self.mac, ETH_P_IP, ipv4(self.ip, GUEST, 6, seg)))

    def syn(self, bad_csum=False):
        self._seg(self.isn, SYN, bad_csum=bad_csum, options=MSS_OPTION)
        self.snd = self.isn + 1

    def wait_syn_ack(self, timeout=5):
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                flags, seq, ack, window, _ = self.q.get(timeout=left)
            except queue.Empty:
                return False
            if flags & SYN and flags & ACK and ack == (self.isn + 1) & 0xFFFFFFFF:
                self.rcv = (seq + 1) & 0xFFFFFFFF
                self.window = window
                return True
            if flags & RST:
                self.reset = True
                return False

    def ack(self):
        self._seg(self.snd, 0)

    def send_at(self, offset, payload, push=True):
        """`payload` at stream offset `offset` (0: the first byte after the
        SYN); what continues the stream sent so far moves `snd` on."""
        self._seg(self.isn + 1 + offset, PSH if push else 0, payload)
        if offset <= self.snd - self.isn - 1 < offset + len(payload):
            self.snd = self.isn + 1 + offset + len(payload)

    def rst(self):
        seg = tcp(self.ip, GUEST, self.port, PORT, self.snd, 0, RST, window=0)
        self.w.send(eth(self.w.guest_mac, self.mac, ETH_P_IP, ipv4(self.ip, GUEST, 6, seg)))

    def receive(self, want, timeout):
        """Takes segments for `timeout` s or until `want` bytes arrived in
        order, acknowledging each; out-of-order data is dropped (the guest
        resends it)."""
        deadline = time.monotonic() + timeout
        while len(self.data) < want and not self.fin and not self.reset:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                flags, seq, _, window, payload = self.q.get(timeout=min(left, 0.5))
            except queue.Empty:
                self.ack()
                continue
            if flags & RST:
                self.reset = True
                break
            self.window = window
            if payload and seq == self.rcv:
                self.data += payload
                self.rcv = (self.rcv + len(payload)) & 0xFFFFFFFF
            if flags & FIN and (seq + len(payload)) & 0xFFFFFFFF == self.rcv:
                self.rcv = (self.rcv + 1) & 0xFFFFFFFF
                self.fin = True
            self.ack()
        return bytes(self.data)


def handshake(wire, ip, port, timeout=5):
    c = RawConn(wire, ip, port)
    c.syn()
    if not c.wait_syn_ack(timeout):
        c.close_queue()
        return None
    c.ack()
    return c


def parse_response(data):
    """(status line, headers, body) of one response with Content-Length
    at the start of `data`, or None when it is not complete."""
    head, sep, rest = data.partition(b"\r\n\r\n")
    if not sep:
        return None
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
    n = int(headers.get("content-length", "-1"))
    if n < 0 or len(rest) < n:
        return None
    return lines[0], headers, rest[:n]


def raise_fd_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def connect_many(n, sources, timeout=5.0, rcvbuf=None, batch=64, deadline=None):
    """Up to `n` kernel TCP connections to the guest, from the addresses in
    `sources` in turn (each bound before connecting), `batch` connects in
    flight at a time. Returns (sockets, failures)."""
    socks, failed = [], 0
    while len(socks) + failed < n and (deadline is None or time.monotonic() < deadline):
        pending = {}
        for i in range(min(batch, n - len(socks) - failed)):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            if rcvbuf:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            if sources:
                s.bind((sources[(len(socks) + i) % len(sources)], 0))
            s.setblocking(False)
            s.connect_ex((GUEST, PORT))
            pending[s.fileno()] = s
        poll = select.poll()
        for fd in pending:
            poll.register(fd, select.POLLOUT)
        end = time.monotonic() + timeout
        while pending and time.monotonic() < end:
            for fd, _ in poll.poll(max(1, int((end - time.monotonic()) * 1000))):
                s = pending.pop(fd, None)
                poll.unregister(fd)
                if s is None:
                    continue
                if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                    s.setblocking(True)
                    socks.append(s)
                else:
                    failed += 1
                    s.close()
        for s in pending.values():
            failed += 1
            s.close()
    return socks, failed


def reset_all(socks):
    """Closes sockets with a reset (SO_LINGER 0): what they had unread is
    dropped at once."""
    for s in socks:
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
        except OSError:
            pass


# ---- the cases ---------------------------------------------------------------


def syn_burst(wire, seconds, **_):
    """SYNs from spoofed off-link sources that never complete a handshake:
    ten times the listen backlog at once, and again every 2 s (a flood).
    The guest's SYN-ACKs go to its gateway (the host), which drops them."""
    sent, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(10 * BACKLOG):
            src = f"198.{18 + random.getrandbits(1)}.{random.getrandbits(8)}.{random.randrange(1, 255)}"
            seg = tcp(src, GUEST, random.randrange(1024, 65535), PORT, random.getrandbits(32), 0, SYN,
                      options=MSS_OPTION)
            wire.send(eth(wire.guest_mac, wire.host_mac, ETH_P_IP, ipv4(src, GUEST, 6, seg, ident=sent)))
            sent += 1
        time.sleep(max(0.0, min(2.0, end - time.monotonic())))
    return {"syns_sent": sent, "syn_acks_seen": wire.seen["syn_acks"]}


def half_open(wire, seconds, **_):
    """A backlog's worth of handshakes from one fake peer that answers ARP
    but never sends the final ACK, held for `seconds` (longer than the
    server's handshake timeout); the guest's SYN-ACK retransmissions are
    counted. Nothing is closed at the end: the server must time them out."""
    ip = "10.0.2.70"
    conns = []
    for i in range(BACKLOG):
        c = RawConn(wire, ip, 20000 + i)
        c.syn()
        conns.append(c)
    deadline = time.monotonic() + 3
    answered = sum(1 for c in conns if c.wait_syn_ack(max(0.01, deadline - time.monotonic())))
    time.sleep(max(0.0, seconds - 3))
    retransmitted = wire.seen["syn_acks_to"].get(ip, 0) - answered
    for c in conns:
        c.close_queue()
    return {"half_open": len(conns), "syn_acked": answered, "syn_ack_retransmissions": retransmitted}


def rst_before_accept(wire, seconds, **_):
    """Handshakes completed by a fake peer and reset right after the final
    ACK, before the server can accept them; 32 at a time, for `seconds`."""
    ip = "10.0.2.71"
    done, unanswered, port, end = 0, 0, 30000, time.monotonic() + seconds
    while time.monotonic() < end:
        group = []
        for _ in range(32):
            c = RawConn(wire, ip, port)
            port = 30000 + (port - 29999) % 30000
            c.syn()
            group.append(c)
        deadline = time.monotonic() + 1
        for c in group:
            if c.wait_syn_ack(max(0.01, deadline - time.monotonic())):
                c.ack()
                c.rst()
                done += 1
            else:
                unanswered += 1
            c.close_queue()
        time.sleep(0.05)
    return {"reset_after_ack": done, "syns_unanswered": unanswered}


def trickle(wire, seconds, heads=32, bodies=16, gap=0.005, **_):
    """`heads` connections send a request head that never ends and
    `bodies` connections a POST whose 60000-byte body never ends, one byte
    per segment (TCP_NODELAY), a byte on each every `gap` s. A connection
    the server closes is opened again (counted)."""
    head = b"GET /file-64k.bin HTTP/1.1\r\nHost: t\r\nX-Slow: "
    body_head = b"POST /cgi-bin/echo HTTP/1.1\r\nHost: t\r\nContent-Length: 60000\r\n\r\n"

    def opened(kind):
        s = socket.create_connection((GUEST, PORT), timeout=5)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setblocking(False)
        if kind == "body":
            s.send(body_head)
        return [s, kind, 0]

    conns, stats = [], {"bytes": 0, "closed_by_server": 0, "connect_failures": 0, "answers": 0}
    for i in range(heads + bodies):
        try:
            conns.append(opened("head" if i < heads else "body"))
        except OSError:
            stats["connect_failures"] += 1
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for c in list(conns):
            s, kind, n = c
            data = head[n:n + 1] if kind == "head" and n < len(head) else b"a"
            try:
                s.send(data)
                c[2] += 1
                stats["bytes"] += 1
                try:
                    got = s.recv(4096)
                    if got:
                        stats["answers"] += 1
                    raise ConnectionResetError("closed")
                except BlockingIOError:
                    pass
            except OSError:
                stats["closed_by_server"] += 1
                s.close()
                conns.remove(c)
                try:
                    conns.append(opened(kind))
                except OSError:
                    stats["connect_failures"] += 1
        time.sleep(gap)
    stats["open_at_end"] = len(conns)
    for c in conns:
        c[0].close()
    return stats


def idle(wire, seconds, count=2000, **_):
    """`count` kernel connections from four addresses (10.0.2.3-6, added to
    tap0 for the case) that send nothing, opened as fast as the server
    takes them (for at most three quarters of `seconds`) and held until
    `seconds` have passed; then closed."""
    sources = [f"10.0.2.{i}" for i in range(3, 7)]
    for a in sources:
        subprocess.run(["ip", "addr", "add", f"{a}/24", "dev", IFACE], capture_output=True)
    raise_fd_limit()
    end = time.monotonic() + seconds
    t0 = time.monotonic()
    try:
        socks, failed = connect_many(count, sources, timeout=3, deadline=t0 + 0.75 * seconds)
        opened_s = time.monotonic() - t0
        time.sleep(max(0.0, end - time.monotonic()))
        # Those the server closed meanwhile read as EOF or a reset.
        closed = 0
        for s in socks:
            s.setblocking(False)
            try:
                if s.recv(1) == b"":
                    closed += 1
            except BlockingIOError:
                pass
            except OSError:
                closed += 1
        for s in socks:
            s.close()
        # The addresses stay until the closes are through (FIN, the
        # server's FIN, the last ACK): removed at once, they would leave
        # the server's half of every connection waiting for a peer that
        # can no longer answer (a client that left the network, a
        # different case).
        time.sleep(3)
    finally:
        for a in sources:
            subprocess.run(["ip", "addr", "del", f"{a}/24", "dev", IFACE], capture_output=True)
    return {"opened": len(socks), "connect_failures": failed, "open_seconds": round(opened_s, 1),
            "closed_by_server": closed}


def ooo_flood(wire, seconds, conns=8, manifest=None, **_):
    """Rounds of `conns` connections from a fake peer, each round 3 s of
    flood (well inside httpd's request timeout): each connection sends the
    start of a 6 KiB request head, then segments of the rest of it at
    random offsets inside the window, never the first missing byte (holes
    everywhere: the reassembly's worst case); then its whole head in order,
    and its response must be /file-64k.bin byte for byte (what was
    reassembled from the flood is the stream that was sent)."""
    ip = "10.0.2.72"
    pad = b"".join(b"%05d," % i for i in range(1000))  # 6000 bytes, every offset distinct
    req = b"GET /file-64k.bin HTTP/1.1\r\nHost: t\r\nX-Pad: " + pad + b"\r\n\r\n"
    start = 40
    want = 64 * 1024
    sha = manifest.get("/file-64k.bin", (want, None))[1] if manifest else None
    sent, rounds, good, failures = 0, 0, 0, []
    port = 40000
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        rounds += 1
        cs = []
        for i in range(conns):
            c = handshake(wire, ip, port)
            port = 40000 + (port - 39999) % 10000
            if c is None:
                failures.append(f"round {rounds}, connection {i}: no SYN-ACK")
                continue
            c.send_at(0, req[:start])
            cs.append(c)
        stop = min(end, time.monotonic() + 3)
        while time.monotonic() < stop:
            for c in cs:
                for _ in range(16):
                    off = random.randrange(start + 16, len(req) - 8)
                    n = random.randrange(1, 64)
                    c.send_at(off, req[off:off + n], push=False)
                    sent += 1
            time.sleep(0.01)
        for c in cs:
            for off in range(start, len(req), 1400):
                c.send_at(off, req[off:off + 1400])
        for i, c in enumerate(cs):
            data = c.receive(want + 4096, timeout=10)
            r = parse_response(data)
            if r is None:
                failures.append(f"round {rounds}, connection {i}: {len(data)} bytes, no whole response"
                                f" (reset {c.reset})")
            elif not r[0].startswith("HTTP/1.1 200"):
                failures.append(f"round {rounds}, connection {i}: {r[0]}")
            elif sha and hashlib.sha256(r[2]).hexdigest() != sha:
                failures.append(f"round {rounds}, connection {i}: {len(r[2])} body bytes, SHA-256 differs")
            else:
                good += 1
            c.rst()
            c.close_queue()
    return {"segments": sent, "rounds": rounds, "connections": rounds * conns, "answered_byte_exact": good,
            "failures": failures[:10]}


def slow_windows(wire, seconds, zero=100, tiny=20, deep=5, manifest=None, **_):
    """`zero` connections pipeline 3 GETs of /file-1m.bin through a 1 KiB
    receive buffer and never read (zero window); the first `deep` of them
    then push as many more as the server takes in 3 s (up to 192 KiB of
    requests: more than the server buffers, so some wait unread in its
    TCP when they are reset); `tiny` connections read /file-1m.bin
    through a 2 KiB buffer, 512 bytes every 20 ms, and check every byte
    against the file (fetched whole and checked against the manifest
    first). At the end the zero-window ones are reset and the tiny-window
    ones closed: whatever they asked for must not be served into the void
    afterwards while the normal client waits."""
    raise_fd_limit()
    start = time.monotonic()
    ref = fetch_whole("/file-1m.bin")
    if manifest and hashlib.sha256(ref).hexdigest() != manifest["/file-1m.bin"][1]:
        return {"error": "/file-1m.bin differs from the manifest"}
    zs, zfail = connect_many(zero, [], rcvbuf=1024)
    get = b"GET /file-1m.bin HTTP/1.1\r\nHost: t\r\n\r\n"
    for s in zs:
        try:
            s.sendall(get * 3)
        except OSError:
            zfail += 1
    many = get * (192 * 1024 // len(get))
    pushed = [0] * min(deep, len(zs))
    end = time.monotonic() + 3
    for s in zs[:deep]:
        s.setblocking(False)
    while time.monotonic() < end and min(taken_by_server(zs[:deep], pushed), default=len(many)) < len(many):
        for i, s in enumerate(zs[:deep]):
            try:
                pushed[i] += s.send(many[pushed[i]:])
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                pushed[i] = len(many)
        time.sleep(0.05)
    ts, tfail = connect_many(tiny, [], rcvbuf=2048)
    got = [bytearray() for _ in ts]
    bad, head_seen = [], [None] * len(ts)
    for s in ts:
        s.sendall(b"GET /file-1m.bin HTTP/1.1\r\nHost: t\r\n\r\n")
        s.setblocking(False)
    # The setup counts: the case lasts `seconds` (the tiny readers read
    # at least 3 s).
    end = max(start + seconds, time.monotonic() + 3)
    while time.monotonic() < end:
        for i, s in enumerate(ts):
            try:
                chunk = s.recv(512)
            except BlockingIOError:
                continue
            except OSError as e:
                bad.append(f"tiny reader {i}: {e!r}")
                continue
            got[i] += chunk
        time.sleep(0.02)
    body_bytes = 0
    for i, g in enumerate(got):
        head, sep, body = bytes(g).partition(b"\r\n\r\n")
        if not sep:
            bad.append(f"tiny reader {i}: {len(g)} bytes, no whole head")
            continue
        if not head.startswith(b"HTTP/1.1 200"):
            bad.append(f"tiny reader {i}: {head[:40]!r}")
        elif body != ref[:len(body)]:
            bad.append(f"tiny reader {i}: {len(body)} body bytes differ from the file")
        body_bytes += len(body)
    deep_taken = min(taken_by_server(zs[:deep], pushed), default=0)
    reset_all(zs)
    for s in ts:
        s.close()
    return {"zero_window": len(zs), "tiny_window": len(ts), "connect_failures": zfail + tfail,
            "deep_request_bytes": deep_taken, "tiny_body_bytes": body_bytes, "failures": bad[:10]}


def taken_by_server(socks, pushed):
    """Per socket, the bytes of `pushed` the server acknowledged: what
    left the host's send queue (TIOCOUTQ: bytes not yet acknowledged)."""
    out = []
    for s, n in zip(socks, pushed):
        try:
            queued = struct.unpack("i", fcntl.ioctl(s.fileno(), termios.TIOCOUTQ, b"\0\0\0\0"))[0]
        except OSError:
            queued = n
        out.append(n - queued)
    return out


def fetch_whole(path, timeout=30):
    """The body of `path` on a connection of its own (200, or AssertionError)."""
    with socket.create_connection((GUEST, PORT), timeout=timeout) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while True:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            data += chunk
    r = parse_response(data)
    if r is None or not r[0].startswith("HTTP/1.1 200"):
        raise AssertionError(f"{path}: {data[:60]!r}")
    return r[2]


def garbage(wire, seconds, **_):
    """For `seconds`, in turn: random bytes as frames (runts and ones of
    every length, random EtherTypes); IPv4 headers that claim more than the
    frame holds, and TCP headers whose data offset runs past the segment;
    SYNs to port 80 with a bad IP or a bad TCP checksum (which must get no
    answer); first fragments of SYNs that never get their rest, and
    overlapping fragments; and an ICMP echo flood with 1000-byte payloads
    (every reply's payload checked)."""
    ip_bad = "10.0.2.73"
    ip_icmp = "10.0.2.74"
    mac_bad = wire.add_fake(ip_bad)
    mac_icmp = wire.add_fake(ip_icmp)
    g = wire.guest_mac
    n = {"junk": 0, "truncated": 0, "bad_csum_syns": 0, "fragments": 0, "icmp": 0}
    port, seq, end = 50000, 0, time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(20):
            # A packet socket sends nothing shorter than an Ethernet header.
            size = random.choice([14, 15, 20, 42, 59, random.randrange(60, 1514)])
            junk = os.urandom(size)
            kind = random.choice([b"\x08\x00", b"\x08\x06", b"\x86\xdd", junk[12:14]])
            wire.send_raw(g + mac_bad + kind + junk[14:])
            n["junk"] += 1
        seg = tcp(ip_bad, GUEST, port, PORT, random.getrandbits(32), 0, SYN, payload=b"x" * 100)
        wire.send(eth(g, mac_bad, ETH_P_IP, ipv4(ip_bad, GUEST, 6, seg, total=1400)))
        short = tcp(ip_bad, GUEST, port + 1, PORT, 1, 0, SYN)
        short = short[:12] + bytes([0xF0]) + short[13:]  # data offset 60 bytes, segment 20
        wire.send(eth(g, mac_bad, ETH_P_IP, ipv4(ip_bad, GUEST, 6, short)))
        wire.send(eth(g, mac_bad, ETH_P_IP, ipv4(ip_bad, GUEST, 6, b"\x00\x50")))  # 2 bytes of TCP
        n["truncated"] += 3
        for bad_ip in (True, False):
            seg = tcp(ip_bad, GUEST, port + 2 + bad_ip, PORT, random.getrandbits(32), 0, SYN,
                      options=MSS_OPTION, bad_csum=not bad_ip)
            wire.send(eth(g, mac_bad, ETH_P_IP, ipv4(ip_bad, GUEST, 6, seg, bad_csum=bad_ip)))
            n["bad_csum_syns"] += 1
        seg = tcp(ip_bad, GUEST, port + 4, PORT, random.getrandbits(32), 0, SYN, payload=os.urandom(64))
        ident = random.getrandbits(16)
        wire.send(eth(g, mac_bad, ETH_P_IP, ipv4(ip_bad, GUEST, 6, seg[:40], ident=ident, mf=True, df=False)))
        wire.send(eth(g, mac_bad, ETH_P_IP, ipv4(ip_bad, GUEST, 6, seg[24:64], ident=ident, frag=3, mf=True,
                                                 df=False)))
        wire.send(eth(g, mac_bad, ETH_P_IP, ipv4(ip_bad, GUEST, 1, os.urandom(48), ident=ident + 1, frag=100,
                                                 df=False)))
        n["fragments"] += 3
        port = 50000 + (port - 49995) % 10000
        for _ in range(10):
            seq = (seq + 1) & 0xFFFF
            payload = os.urandom(1000)
            wire.icmp_sent[(0x1A7E, seq)] = payload
            wire.send(eth(g, mac_icmp, ETH_P_IP, ipv4(ip_icmp, GUEST, 1, icmp_echo(0x1A7E, seq, payload))))
            n["icmp"] += 1
        time.sleep(0.005)
    time.sleep(1)
    n["syn_acks_to_bad"] = wire.seen["syn_acks_to"].get(ip_bad, 0)
    n["icmp_replies"] = wire.seen["icmp_replies"]
    n["icmp_bad_replies"] = wire.seen["icmp_bad_replies"]
    return n


CASES = {
    "syn_burst": syn_burst,
    "half_open": half_open,
    "rst_before_accept": rst_before_accept,
    "trickle": trickle,
    "idle": idle,
    "ooo_flood": ooo_flood,
    "slow_windows": slow_windows,
    "garbage": garbage,
}


def load_manifest(path):
    out = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 4 and parts[0] == "file":
                out[parts[1]] = (int(parts[2]), parts[3])
    return out


def run_case(name, seconds, manifest=None):
    """Runs case `name` for `seconds` on a fresh Wire; returns its result
    (with "wire": frames seen, SYN-ACKs, ARP answers)."""
    wire = Wire()
    try:
        wire.resolve_guest()
        r = CASES[name](wire, float(seconds), manifest=manifest)
        r["wire"] = {k: v for k, v in wire.seen.items() if k != "syn_acks_to"}
        return r
    finally:
        wire.close()


if __name__ == "__main__":
    case, secs = sys.argv[1], float(sys.argv[2])
    man = load_manifest(sys.argv[3]) if len(sys.argv) > 3 else None
    try:
        res = run_case(case, secs, man)
    except Exception as e:  # noqa: BLE001 - reported to the caller as the result
        res = {"error": repr(e)}
    print(json.dumps(res), flush=True)


# ---- the normal client and the measurement -----------------------------------

NORMAL_PATH = "/file-64k.bin"
# A normal client opens a new connection after this many requests, so that
# admission of new connections is measured too, not only one that was
# established before the attack.
REQUESTS_PER_CONNECTION = 20


def read_response(s, buf):
    """One response with Content-Length from socket `s` (`buf`: bytes read
    before): (status, headers, body, rest)."""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed by the server after {len(buf)} bytes of a head")
        buf += chunk
    head, _, buf = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
    n = int(headers.get("content-length", "-1"))
    if n < 0:
        raise ValueError(f"no Content-Length in {lines[0]!r}")
    while len(buf) < n:
        chunk = s.recv(1 << 20)
        if not chunk:
            raise ConnectionError(f"closed by the server after {len(buf)} of {n} body bytes")
        buf += chunk
    return lines[0], headers, buf[:n], buf[n:]


class NormalClient:
    """One keep-alive client of NORMAL_PATH in a thread: every body's
    SHA-256 is checked against `sha256`; a new connection every
    REQUESTS_PER_CONNECTION requests; connect and response timeouts of 5 s.
    Records when each good response completed and every failure (time,
    what), so that rates can be taken over any window afterwards."""

    def __init__(self, sha256, path=NORMAL_PATH):
        self.sha, self.path = sha256, path
        self.done = []  # monotonic times of good responses
        self.errors = []  # (time, message)
        self.bad = []  # (time, message): a wrong body
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def finish(self):
        self.stop = True
        self.thread.join(timeout=15)

    def _run(self):
        req = f"GET {self.path} HTTP/1.1\r\nHost: t\r\n\r\n".encode()
        while not self.stop:
            s = None
            try:
                s = socket.create_connection((GUEST, PORT), timeout=5)
                buf = b""
                for _ in range(REQUESTS_PER_CONNECTION):
                    if self.stop:
                        break
                    s.sendall(req)
                    status, headers, body, buf = read_response(s, buf)
                    now = time.monotonic()
                    if not status.startswith("HTTP/1.1 200") or hashlib.sha256(body).hexdigest() != self.sha:
                        self.bad.append((now, f"{status}, {len(body)} bytes, SHA-256 "
                                              f"{hashlib.sha256(body).hexdigest()[:16]}"))
                        break
                    self.done.append(now)
                    if headers.get("connection", "").lower() == "close":
                        break
            except (OSError, ValueError) as e:
                self.errors.append((time.monotonic(), repr(e)))
                time.sleep(0.1)
            finally:
                if s is not None:
                    s.close()

    def rate(self, t0, t1):
        """Good responses per second completed in [t0, t1)."""
        if t1 <= t0:
            return 0.0
        return sum(1 for t in self.done if t0 <= t < t1) / (t1 - t0)

    def errors_in(self, t0, t1):
        return [m for t, m in self.errors if t0 <= t < t1]


class Stats:
    """/cgi-bin/stats?format=json over one keep-alive connection (one per
    reading would leave a TIME-WAIT socket each); None when it does not
    answer within `timeout` (which is itself a finding)."""

    def __init__(self):
        self.s, self.buf = None, b""

    def get(self, timeout=5):
        for _ in range(2):
            try:
                if self.s is None:
                    self.s = socket.create_connection((GUEST, PORT), timeout=timeout)
                    self.buf = b""
                self.s.settimeout(timeout)
                self.s.sendall(b"GET /cgi-bin/stats?format=json HTTP/1.1\r\nHost: t\r\n\r\n")
                status, _, body, self.buf = read_response(self.s, self.buf)
                if status.startswith("HTTP/1.1 200"):
                    return json.loads(body)
            except (OSError, ValueError):
                pass
            self.close()
        return None

    def close(self):
        if self.s is not None:
            self.s.close()
        self.s = None


# The gauges of memory the components hold, and what "back" tolerates
# (tests/robot/web_tap.robot's "Memory Should Be Back To" uses the same):
# httpd packs response headers into shared pages (the page being filled
# stays); the heaps keep tables at the size they grew to.
GAUGES = [
    ("netstack", "tcp_connections", 0), ("netstack", "tcp_socket_bytes", 0),
    ("netstack", "tcp_send_queued_bytes", 0), ("netstack", "tcp_hdr_pool_pages_in_use", 0),
    ("netstack", "tcp_sock_pool_pages_in_use", 0), ("netstack", "tcp_heap_used", 262144),
    ("httpd", "connections_open", 0), ("httpd", "pool_pages_in_use", 2), ("httpd", "heap_used", 262144),
    ("fs", "pool_pages_in_use", 0),
]


# ATTACK_DIAG=1: every counter the attack changed goes into the result.
DIAG = os.environ.get("ATTACK_DIAG") == "1"


def counters_changed(before, after):
    """{component.counter: (before, after)} for every number that changed."""
    out = {}
    for c, kv in (after or {}).items():
        if not isinstance(kv, dict):
            continue
        for k, v in kv.items():
            b = (before or {}).get(c, {}).get(k)
            if isinstance(v, (int, float)) and v != b:
                out[f"{c}.{k}"] = (b, v)
    return out


def gauges(stats):
    return {f"{c}.{k}": stats.get(c, {}).get(k) for c, k, _ in GAUGES} if stats else None


def not_back(now, before):
    """The gauges above their level before plus slack: {name: (now, before)};
    {"stats": ...} when there is no reading."""
    if now is None:
        return {"stats": "/cgi-bin/stats did not answer"}
    bad = {}
    for c, k, slack in GAUGES:
        n, b = now.get(f"{c}.{k}"), before.get(f"{c}.{k}")
        if n is None or b is None:
            continue
        if n > b + slack:
            bad[f"{c}.{k}"] = (n, b)
    return bad


WARM = [NORMAL_PATH, "/file-1m.bin"]


def measure(case, seconds, sha256, manifest_path, before_s=5.0, after_s=5.0, settle_s=15.0, ours=True,
            stats=None):
    """One case on the server at GUEST: the normal client alone for
    `before_s`, with the attack (attacks.py CASE SECONDS in a process of
    its own) and for `after_s` after it; then, on our system, the memory
    gauges every second until they are back to their level before the
    normal client started (at most `settle_s` after the normal client
    stopped; "back_seconds" counts from then). Returns rates (responses/s)
    before, during (from 1 s into the attack to its end) and after, their
    fractions of the rate before, the normal client's failures per phase,
    the attack's own result and the memory readings."""
    stats = stats or Stats()
    r = {"case": case, "seconds": seconds, "after_s": after_s, "settle_s": settle_s}
    # The files the attacks and the client ask for, read once first: the
    # pages the file cache keeps for them are in the baseline.
    for path in WARM:
        fetch_whole(path)
    if ours:
        base = stats.get(timeout=10)
        if base is None:
            raise AssertionError("/cgi-bin/stats did not answer before the attack")
        r["gauges_before"] = gauges(base)
    client = NormalClient(sha256).start()
    t0 = time.monotonic()
    time.sleep(before_s)
    ta = time.monotonic()
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), case, str(seconds), manifest_path],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=seconds + 180)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    te = time.monotonic()
    busy = []
    if DIAG and ours:
        # Each component's busy cycles every half second after the attack.
        diag = Stats()
        while time.monotonic() < te + after_s:
            st = diag.get(timeout=2) or {}
            busy.append((round(time.monotonic() - te, 1),
                         {c: kv.get(k) for c, kv in st.items() if isinstance(kv, dict)
                          for k in kv if k.endswith("busy_cycles")}))
            time.sleep(0.5)
        diag.close()
    else:
        time.sleep(after_s)
    tz = time.monotonic()
    r["busy_after"] = busy
    client.finish()
    try:
        r["attack"] = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        r["attack"] = {"error": f"no result (exit {proc.returncode}): {err.strip()[-400:]}"}
    r["attack_seconds"] = round(te - ta, 1)
    r["before"] = client.rate(t0 + 1, ta)
    # From 1 s into the attack (a quarter of it when it was shorter).
    r["during"] = client.rate(ta + min(1.0, (te - ta) / 4), te)
    r["after"] = client.rate(te, tz)
    # Second by second after the attack: how the rate comes back.
    r["after_by_second"] = [round(client.rate(te + i, min(tz, te + i + 1))) for i in range(int(after_s))]
    for k in ("during", "after"):
        r[f"{k}_fraction"] = r[k] / r["before"] if r["before"] else 0.0
    r["errors"] = {"before": client.errors_in(t0, ta)[:5], "during": client.errors_in(ta, te)[:5],
                   "after": client.errors_in(te, tz + 15)[:5]}
    r["error_counts"] = {"before": len(client.errors_in(t0, ta)), "during": len(client.errors_in(ta, te)),
                         "after": len(client.errors_in(te, tz + 15))}
    r["bad_bodies"] = [m for _, m in client.bad][:5]
    if ours:
        t = time.monotonic()
        r["back_seconds"], r["not_back"] = None, None
        while True:
            now = gauges(stats.get())
            missing = not_back(now, r["gauges_before"])
            if not missing:
                r["back_seconds"] = round(time.monotonic() - tz, 1)
                break
            if time.monotonic() - t > settle_s:
                r["not_back"] = missing
                break
            time.sleep(1)
        r["gauges_after"] = now
        r["counters_changed"] = DIAG and counters_changed(base, stats.get())
        stats.close()
    return r
