"""bench/zerowindow, inside the namespace: see that script.

usage: zerowindow.py OUT ROUNDS ALONE_S LOADED_S HELD CLIENTS ICOUNT SYSTEMS...
"""
import hashlib
import http.client
import json
import os
import socket
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import iolitebench as B  # noqa: E402

out, rounds, alone_s, loaded_s = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
held_n, clients, icount, systems = int(sys.argv[5]), int(sys.argv[6]), sys.argv[7] == "1", sys.argv[8:]
QEMU_EXTRA = ("-icount", "shift=0") if icount else ()
ours = [s for s in systems if s != "linux"]
PATHS = ["/file-64k.bin", "/index.html"]
HELD_PATH, HELD_REQUESTS = "/file-1m.bin", 3
manifest = B.load_manifest(os.path.join(B.build_dir(ours[0] if ours else "iolite"), "images", "site.manifest"))
B.tap_up()

# The gauges of memory netstack and httpd hold (and the fs pool, which the
# held connections' file pages are in), with what "back" tolerates: httpd
# packs response headers into shared pages (the page being filled stays),
# the heaps keep tables at the size they grew to (tests/robot/web_tap.robot's
# "Memory Should Be Back To" uses the same slack).
GAUGES = [
    ("netstack", "tcp_connections", 0), ("netstack", "tcp_socket_bytes", 0),
    ("netstack", "tcp_send_queued_bytes", 0), ("netstack", "tcp_hdr_pool_pages_in_use", 0),
    ("netstack", "tcp_sock_pool_pages_in_use", 0), ("netstack", "tcp_heap_used", 262144),
    ("httpd", "connections_open", 0), ("httpd", "pool_pages_in_use", 2), ("httpd", "heap_used", 262144),
    ("fs", "pool_pages_in_use", 0),
]
# For the report: the counters that say what the held connections cost.
ACTIVITY = [("netstack", "tcp_wakeups"), ("netstack", "tcp_polls"), ("netstack", "tcp_busy_cycles"),
            ("netstack", "tcp_send_full"), ("netstack", "tcp_send_retries"), ("netstack", "tcp_tx_frames"),
            ("netstack", "tcp_rx_frames"),
            ("netdrv", "drv_busy_cycles"), ("netdrv", "drv_irqs"), ("httpd", "wakeups"),
            ("httpd", "send_timeouts"), ("httpd", "connections_send_full")]
# Counted per normal request in each run of the clients (work per request,
# alone and with the held connections).
COST = {"netstack.tcp_busy_cycles", "netstack.tcp_polls", "netstack.tcp_wakeups", "netstack.tcp_rx_frames",
        "netstack.tcp_tx_frames", "netstack.tcp_send_retries", "netdrv.drv_busy_cycles", "httpd.wakeups"}


def gauges(s):
    return {f"{c}.{k}": s.get(c, {}).get(k) for c, k, _ in GAUGES}


def activity(s):
    return {**{f"{c}.{k}": s.get(c, {}).get(k) for c, k in ACTIVITY}, "uptime_ms": s.get("uptime_ms")}


def memory_back(now, before):
    """The gauges that are not back to `before` (name: (now, before))."""
    bad = {}
    for c, k, slack in GAUGES:
        n, b = now.get(f"{c}.{k}"), before.get(f"{c}.{k}")
        if n is None or b is None:
            continue
        if n > b + slack:
            bad[f"{c}.{k}"] = (n, b)
    return bad


def normal_clients(n, seconds, during=None, probe=None):
    """`n` keep-alive clients (threads), each on its own connection,
    request PATHS round-robin for `seconds`; every body is checked against
    the manifest (length and SHA-256). The clock starts when all are
    connected. `during` is called halfway through; `probe` (counters)
    before the clients connect and after they stopped, and the per-request
    differences returned as "cost". Returns req/s, MB/s, requests, errors
    and bad bodies (and the first few failures)."""
    p0 = probe() if probe else None
    counts, nbytes = [0] * n, [0] * n
    errors, bad = [], []
    lock = threading.Lock()
    stop = [float("inf")]

    def run(i, conn):
        k = i
        while time.monotonic() < stop[0]:
            try:
                if conn is None:
                    conn = http.client.HTTPConnection(B.GUEST, 80, timeout=30)
                p = PATHS[k % len(PATHS)]
                k += 1
                conn.request("GET", p)
                r = conn.getresponse()
                body = r.read()
                size, sha = manifest[p]
                if r.status != 200 or len(body) != size or hashlib.sha256(body).hexdigest() != sha:
                    with lock:
                        bad.append(f"client {i} {p}: status {r.status}, {len(body)} bytes")
                else:
                    counts[i] += 1
                    nbytes[i] += len(body)
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
    for i in range(n):
        conn = http.client.HTTPConnection(B.GUEST, 80, timeout=30)
        conn.connect()
        threads.append(threading.Thread(target=run, args=(i, conn)))
        threads[-1].start()
    t0 = time.monotonic()
    stop[0] = t0 + seconds
    mid = None
    if during is not None:
        time.sleep(seconds / 2)
        try:
            mid = during()
        except (OSError, ValueError) as e:
            mid = {"error": repr(e)}
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0
    total = sum(counts)
    if min(counts) == 0:
        errors.append(f"a client got no answer: {counts}")
    cost = None
    if probe:
        p1 = probe()
        if p0 and p1 and total:
            cost = {k: (p1[k] - p0[k]) / total for k in p1 if k in COST and p0.get(k) is not None
                    and p1[k] is not None}
            up = p1.get("uptime_ms", 0) - p0.get("uptime_ms", 0)
            if up > 0:
                cost["guest_ms"] = up
    return {"rps": total / elapsed, "mbs": sum(nbytes) / elapsed / 1e6, "requests": total,
            "errors": len(errors), "bad": len(bad), "first_failures": (errors + bad)[:5], "during": mid,
            "cost": cost}


def peek_head(s, want=12, timeout=30):
    """The first `want` bytes the server sent on `s`, peeked (not read)."""
    deadline = time.monotonic() + timeout
    got = b""
    while len(got) < want and time.monotonic() < deadline:
        got = s.recv(want, socket.MSG_PEEK)
        if not got:
            break
        if len(got) < want:
            time.sleep(0.05)
    return got


def open_held(n, batch=16):
    """`n` connections that each pipeline HELD_REQUESTS GETs of HELD_PATH
    with a 1 KiB receive buffer (set before connecting) and never read:
    the server sees a zero window. Opened `batch` at a time, each batch's
    responses begun (their first bytes peeked at, not read) before the
    next. Returns the sockets."""
    req = f"GET {HELD_PATH} HTTP/1.1\r\nHost: {B.GUEST}\r\n\r\n".encode() * HELD_REQUESTS
    socks = []
    while len(socks) < n:
        group = []
        for _ in range(min(batch, n - len(socks))):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
            s.settimeout(30)
            s.connect((B.GUEST, 80))
            s.sendall(req)
            group.append(s)
        for s in group:
            head = peek_head(s)
            if not head.startswith(b"HTTP/1.1 200"):
                raise AssertionError(f"held connection {len(socks)}: response begins {head!r}")
            socks.append(s)
    return socks


def resume_check(s):
    """A held connection starts reading: its HELD_REQUESTS responses must
    arrive whole and byte-exact (what the server queued for it while its
    window was closed was kept, not lost or corrupted)."""
    size, sha = manifest[HELD_PATH]
    for i in range(HELD_REQUESTS):
        # Responses are pipelined back to back: read exactly one at a time.
        status, body = read_response_exact(s, size)
        if not status.startswith("HTTP/1.1 200"):
            return f"response {i + 1}: {status}"
        if len(body) != size or hashlib.sha256(body).hexdigest() != sha:
            return f"response {i + 1}: {len(body)} bytes, sha256 differs"
    return None


def read_response_exact(s, size, timeout=120):
    """Reads one response head byte by byte up to its empty line (so no
    byte of the next pipelined response is taken), then its body."""
    s.settimeout(timeout)
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        c = s.recv(1)
        if not c:
            raise ConnectionError(f"closed in a response head after {len(head)} bytes")
        head += c
        if len(head) > 8192:
            raise AssertionError("response head over 8 KiB")
    lines = head.decode("latin-1").split("\r\n")
    length = next((int(v) for k, _, v in (x.partition(":") for x in lines[1:]) if k.strip().lower() == "content-length"),
                  None)
    if length is None:
        raise AssertionError(f"no Content-Length in {lines[0]!r}")
    body = bytearray()
    while len(body) < length:
        chunk = s.recv(min(1 << 20, length - len(body)))
        if not chunk:
            raise ConnectionError(f"closed after {len(body)} of {length} body bytes")
        body += chunk
    return lines[0], bytes(body)


def close_held(socks):
    """Resets every held connection (their data is unread)."""
    for s in socks:
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            s.close()
        except OSError:
            pass


def linux_status(base):
    """The Linux reference's /proc/net/sockstat and MemAvailable, which its
    /init writes to /.status every second when booted with `iolite_status`
    (bench/linux-nginx); None if it is not there."""
    try:
        st, body = B.get(base, "/.status", 10)
    except OSError:
        return None
    if st != 200:
        return None
    g = {}
    for line in body.decode("latin-1").splitlines():
        if line.startswith("TCP:"):
            f = line.split()[1:]
            d = dict(zip(f[0::2], (int(x) for x in f[1::2])))
            g["tcp.inuse"], g["tcp.orphan"], g["tcp.mem_pages"] = d.get("inuse"), d.get("orphan"), d.get("mem")
        elif line.startswith("MemAvailable:"):
            g["mem_available_kib"] = int(line.split()[1])
    return g


class Stats:
    """/cgi-bin/stats?format=json over one keep-alive connection: a
    connection per reading would leave a TIME-WAIT socket in netstack each
    (10 s), and the readings would count their own."""

    def __init__(self):
        self.conn = None

    def get(self):
        for attempt in range(3):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection(B.GUEST, 80, timeout=30)
                self.conn.request("GET", "/cgi-bin/stats?format=json")
                r = self.conn.getresponse()
                body = r.read()
                if r.status != 200:
                    raise ValueError(f"stats: status {r.status}")
                return json.loads(body)
            except (OSError, http.client.HTTPException, ValueError):
                if self.conn is not None:
                    self.conn.close()
                self.conn = None
                if attempt == 2:
                    raise
                time.sleep(1)

    def close(self):
        if self.conn is not None:
            self.conn.close()
        self.conn = None


STATS = Stats()


def snapshot(system, base):
    if system == "linux":
        return linux_status(base)
    s = STATS.get()
    return {**gauges(s), **activity(s)}


results = []
for rnd in range(1, rounds + 1):
    for system in systems:
        print(f"==> round {rnd}/{rounds}: {system}", flush=True)
        kw = {"append_extra": "iolite_status"} if system == "linux" else {}
        g = B.boot(system, simulate_from=ours[0] if ours else "iolite", qemu_extra=QEMU_EXTRA, **kw)
        r = {"round": rnd, "system": system}
        socks = []
        try:
            for p in PATHS + [HELD_PATH]:
                B.check_bytes(g.base, p, *manifest[p])
            r["before"] = snapshot(system, g.base)
            probe = None if system == "linux" else (lambda: snapshot(system, g.base))
            r["alone1"] = normal_clients(clients, alone_s, probe=probe)
            t = time.monotonic()
            socks = open_held(held_n)
            r["open_s"] = time.monotonic() - t
            r["held"] = snapshot(system, g.base)
            r["loaded"] = normal_clients(clients, loaded_s, during=lambda: snapshot(system, g.base), probe=probe)
            r["end"] = snapshot(system, g.base)
            r["held_for_s"] = time.monotonic() - t
            # The last one opened (held the shortest: the servers close a
            # connection that took nothing for 60 s) reads everything.
            last = socks.pop()
            try:
                r["resume"] = resume_check(last) or "ok"
            except (OSError, AssertionError, ValueError, StopIteration) as e:
                r["resume"] = repr(e)
            last.close()
            close_held(socks)
            socks = []
            t = time.monotonic()
            r["back_s"] = None
            while time.monotonic() - t < 60:
                now = snapshot(system, g.base)
                if system == "linux":
                    ok = now is None or (now.get("tcp.inuse", 0) <= (r["before"] or {}).get("tcp.inuse", 0) + 1)
                else:
                    ok = not memory_back(now, r["before"])
                if ok:
                    r["back_s"] = time.monotonic() - t
                    break
                time.sleep(2)
            r["after"] = now
            if system != "linux":
                r["not_back"] = memory_back(now, r["before"])
            r["alone2"] = normal_clients(clients, alone_s, probe=probe)
            base_rps = (r["alone1"]["rps"] + r["alone2"]["rps"]) / 2
            r["ratio"] = r["loaded"]["rps"] / base_rps if base_rps else None
        except (OSError, AssertionError, ValueError, KeyError, http.client.HTTPException) as e:
            print(f"  {system}: {e!r}; this round of it is skipped (serial log {g.log})", flush=True)
            r["failed"] = repr(e)
        finally:
            close_held(socks)
            STATS.close()
            B.stop(g)
        results.append(r)
        if "ratio" in r:
            a1, lo, a2 = r["alone1"], r["loaded"], r["alone2"]
            print(f"  {system:7} alone {a1['rps']:6.1f} req/s, with {held_n} held {lo['rps']:6.1f}, alone again"
                  f" {a2['rps']:6.1f}: ratio {r['ratio']:.2f}; errors {a1['errors']}/{lo['errors']}/{a2['errors']},"
                  f" bad bodies {a1['bad'] + lo['bad'] + a2['bad']}; {held_n} opened in {r['open_s']:.1f} s,"
                  f" resume check: {r['resume']}; memory back after"
                  f" {'%.0f s' % r['back_s'] if r['back_s'] is not None else 'NOT within 60 s'}", flush=True)
            for f in a1["first_failures"] + lo["first_failures"] + a2["first_failures"]:
                print(f"    {f}", flush=True)


def runs(system):
    return [r for r in results if r["system"] == system and "ratio" in r]


def mem_line(label, key, system):
    rs = runs(system)
    if not rs or not rs[0].get(key):
        return None
    names = list(rs[0][key].keys())
    cells = []
    for n in names:
        vals = [r[key].get(n) for r in rs if r.get(key) and r[key].get(n) is not None]
        if vals:
            cells.append(f"{n} {statistics.median(vals):.0f}")
    return f"  {label:7}: " + ", ".join(cells)


lines = [f"bench/zerowindow: {clients} keep-alive clients (GET {' and '.join(PATHS)} in turn, every body's SHA-256"
         f" checked) alone for {alone_s:.0f} s, then while {held_n} connections each ask for {HELD_REQUESTS} x"
         f" {HELD_PATH} through a 1 KiB receive buffer and never read (zero window) for {loaded_s:.0f} s, then alone"
         f" again for {alone_s:.0f} s; TAP in a network namespace; {rounds} round(s), systems interleaved",
         "ratio = req/s with the held connections / mean of req/s alone before and after; median, spread ="
         " max-min in % of the median", ""]
W = 13
hdr = (f"{'system':8} | {'alone req/s':>{W}} | {'held req/s':>{W}} | {'ratio':>6} | {'min-max':>10} |"
       f" {'spread':>6} | {'errors':>6} | {'bad':>4} | {'resumed':>7} | {'mem back':>8}")
lines += [hdr, "-" * len(hdr)]
for s in systems:
    rs = runs(s)
    failed = [r for r in results if r["system"] == s and "ratio" not in r]
    if not rs:
        lines.append(f"{s:8} | (every round failed: {failed[0].get('failed') if failed else '?'})")
        continue
    alone = statistics.median((r["alone1"]["rps"] + r["alone2"]["rps"]) / 2 for r in rs)
    held = statistics.median(r["loaded"]["rps"] for r in rs)
    c = B.cell([r["ratio"] for r in rs])
    errors = sum(r[k]["errors"] for r in rs for k in ("alone1", "loaded", "alone2"))
    bad = sum(r[k]["bad"] for r in rs for k in ("alone1", "loaded", "alone2"))
    resumed = sum(1 for r in rs if r["resume"] == "ok")
    back = [r["back_s"] for r in rs if r["back_s"] is not None]
    lines.append(f"{s:8} | {alone:{W}.1f} | {held:{W}.1f} | {c['median']:6.2f} | {c['min']:4.2f}-{c['max']:4.2f} |"
                 f" {c['spread']:5.0f}% | {errors:6} | {bad:4} | {resumed:3}/{len(rs):<3} |"
                 f" {len(back)}/{len(rs)} max {max(back) if back else 0:.0f}s"
                 + (f" ({len(failed)} round(s) failed: {failed[0]['failed']})" if failed else ""))
lines.append("")
lines.append("per round: ratio (alone before / with them / alone after, req/s)")
for s in systems:
    lines.append(f"  {s:7}: " + "; ".join(f"{r['ratio']:.2f} ({r['alone1']['rps']:.1f}/{r['loaded']['rps']:.1f}/"
                                           f"{r['alone2']['rps']:.1f})" for r in runs(s)))
lines.append("")
lines.append("memory and activity (medians over rounds): start (before the held connections), held (with them open), halfway"
             " through the loaded run, at its end, and after they were reset (once back, or after 60 s)")
for s in systems:
    lines.append(f"{s}:")
    for label, key in (("start", "before"), ("held", "held"), ("during", None), ("end", "end"), ("after", "after")):
        if key is None:
            rs = runs(s)
            durs = [r["loaded"]["during"] for r in rs if isinstance(r["loaded"].get("during"), dict)
                    and "error" not in r["loaded"]["during"]]
            if durs:
                lines.append("  during : " + ", ".join(
                    f"{n} {statistics.median(d[n] for d in durs if d.get(n) is not None):.0f}"
                    for n in durs[0] if all(d.get(n) is not None for d in durs)))
            continue
        m = mem_line(label, key, s)
        if m:
            lines.append(m)
    if s != "linux":
        nb = [r.get("not_back") for r in runs(s) if r.get("not_back")]
        lines.append(f"  not back after 60 s: {nb}" if nb else "  every gauge back to its level before (within the"
                     " slack of tests/robot/web_tap.robot) in every round")
lines.append("")
unit = "guest instructions (-icount shift=0)" if icount else "TSC cycles (host time under TCG: noisy)"
lines.append(f"work per normal request (medians over rounds; busy = {unit}): alone before / with the held"
             " connections / alone after")
for s in ours:
    rs = runs(s)
    if not rs or not rs[0]["loaded"].get("cost"):
        continue
    lines.append(f"{s}:")
    for k in sorted(rs[0]["loaded"]["cost"]):
        if k == "guest_ms":
            continue
        cells = []
        for ph in ("alone1", "loaded", "alone2"):
            vals = [r[ph]["cost"][k] for r in rs if r[ph].get("cost") and k in r[ph]["cost"]]
            v = statistics.median(vals) if vals else float("nan")
            cells.append(f"{v / 1e3:.0f}k" if "cycles" in k else f"{v:.2f}")
        lines.append(f"  {k:28} " + " / ".join(cells))
text = "\n".join(lines)
print(text)
with open(out + ".txt", "w") as f:
    f.write(text + "\n")
with open(out + ".json", "w") as f:
    json.dump({"rounds": rounds, "icount": icount, "alone_s": alone_s, "loaded_s": loaded_s, "held": held_n, "clients": clients,
               "paths": PATHS, "held_path": HELD_PATH, "held_requests": HELD_REQUESTS, "systems": systems,
               "results": results}, f, indent=1)
