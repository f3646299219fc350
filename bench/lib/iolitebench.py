"""The web benchmarks' shared machinery (bench/web, sizes, trace, slow, cgi).

Runs inside the network namespace the bench script made (`unshare --net`):
`tap_up()` makes tap0 (10.0.2.2/24) there, so the guests keep their static
10.0.2.15/24 and the host's Linux TCP is their peer; nothing leaves the
namespace. `boot()` starts one system (an Iolite OS image, or the Linux +
nginx reference of bench/linux-nginx) on it and waits for `/`; `stop()`
kills it. Load generators: `h2load()` (keep-alive, fixed URL) and `wrk()`
(either, and a request log through bench/lib/replay.lua). `stats()` reads
/cgi-bin/stats?format=json (Iolite OS only), `memory()` names the gauges
of memory that components hold, `fs_delta()` the file cache's traffic
between two readings. `check_bytes()` compares a response body with the
site manifest's SHA-256. `cell()` takes the median of rounds.
"""
import hashlib
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
GUEST = "10.0.2.15"
LINUX = os.path.join(ROOT, "build", "bench-linux")  # bench_linux's default
REPLAY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "replay.lua")
PAGE = 4096


def tap_up():
    """tap0 with 10.0.2.2/24 in this (fresh) namespace; many ephemeral ports
    and TIME-WAIT reuse for the clients (one connection per request)."""
    for cmd in (["ip", "link", "set", "lo", "up"], ["ip", "tuntap", "add", "dev", "tap0", "mode", "tap"],
                ["ip", "link", "set", "tap0", "up"], ["ip", "addr", "add", "10.0.2.2/24", "dev", "tap0"]):
        subprocess.run(cmd, check=True)
    for key, value in (("net/ipv4/ip_local_port_range", "1024 65535"), ("net/ipv4/tcp_tw_reuse", "1")):
        try:
            with open(f"/proc/sys/{key}", "w") as f:
                f.write(value)
        except OSError:
            pass


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def get(base, path, timeout=10):
    with urllib.request.urlopen(base + path, timeout=timeout) as r:
        return r.status, r.read()


# A modelled disk: at most this many requests per second on our systems'
# virtio-blk (simulate --disk-iops), set by the commands' --disk-iops
# option; empty: the image is read at the speed of the host's page cache.
DISK_IOPS = os.environ.get("BENCH_DISK_IOPS", "")


# The NIC every system of a run gets (simulate --nic: e1000 or virtio),
# set by bench/web's --nic option.
NIC = os.environ.get("BENCH_NIC", "e1000")


def disk_note():
    """How the disk was modelled, for a table's header."""
    return f"disk throttled to {DISK_IOPS} requests/s" if DISK_IOPS else "disk unthrottled (host page cache)"


def build_dir(name):
    """build/bench-web-NAME (NAME: a copy mode, or MODE-VARIANT)."""
    return os.path.join(ROOT, "build", f"bench-web-{name}")


class Guest:
    def __init__(self, proc, base, log):
        self.proc, self.base, self.log = proc, base, log

    def serial(self):
        with open(self.log, errors="replace") as f:
            return f.read()


def boot(system, disk=None, net="tap", simulate_from=None, linux=LINUX, timeout=240, append_extra="",
         qemu_extra=()):
    """Starts `system` ("linux": bench/linux-nginx's build in `linux`, with
    the simulate script of image `simulate_from` and `append_extra` added
    to its kernel command line; or an image NAME in build/bench-web-NAME
    with `disk`, default its own site.img) and returns a Guest once it
    answers `/` with 200. `qemu_extra`: more QEMU arguments (e.g.
    `-icount shift=0`)."""
    if system == "linux":
        simulate = os.path.join(build_dir(simulate_from), "simulate")
        with open(os.path.join(linux, "cmdline")) as f:
            cmdline = f.read().strip()
        if append_extra:
            cmdline += " " + append_extra
        args = ["--kernel", os.path.join(linux, "vmlinuz"), "--initrd", os.path.join(linux, "initramfs.cpio.gz"),
                "--append", cmdline]
    else:
        d = build_dir(system)
        simulate = os.path.join(d, "simulate")
        args = ["--disk", disk or os.path.join(d, "images", "site.img")]
        if DISK_IOPS:
            args += ["--disk-iops", DISK_IOPS]
    args += ["--nic", NIC]
    if net == "tap":
        args += ["--tap", "tap0"]
        base = f"http://{GUEST}"
    else:
        port = free_port()
        args += ["--port", f"{port}:80"]
        base = f"http://127.0.0.1:{port}"
    if qemu_extra:
        args += ["--", *qemu_extra]
    log = tempfile.NamedTemporaryFile(prefix=f"bench-{system}-", suffix=".log", delete=False)
    proc = subprocess.Popen([simulate, *args], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            break
        try:
            if get(base, "/", 3)[0] == 200:
                return Guest(proc, base, log.name)
        except OSError:
            time.sleep(1)
    stop(proc)
    raise SystemExit(f"{system} did not serve / within {timeout} s (serial log {log.name})")


def stop(guest_or_proc):
    proc = getattr(guest_or_proc, "proc", guest_or_proc)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def load_manifest(path):
    """{path: (size, sha256)} from a site.manifest."""
    out = {}
    with open(path) as f:
        for line in f:
            kind, p, size, sha = line.split()
            if kind == "file":
                out[p] = (int(size), sha)
    return out


def check_bytes(base, path, size, sha=None, timeout=60):
    """Fetches `path` and checks its length and SHA-256 (or, for sha=None,
    only the length); raises AssertionError with what differed."""
    st, body = get(base, path, timeout)
    assert st == 200, f"{path}: status {st}"
    assert len(body) == size, f"{path}: {len(body)} bytes, expected {size}"
    if sha is not None:
        got = hashlib.sha256(body).hexdigest()
        assert got == sha, f"{path}: sha256 {got}, expected {sha}"
    return body


def blob_bytes(size):
    """The body of /cgi-bin/blob?size=N (byte i = i mod 251)."""
    return bytes(i % 251 for i in range(size))


def guest_cpu_seconds(guest_or_proc):
    """CPU time (user + system, s) used so far by the guest's QEMU: every
    process of the session `boot` started. Under TCG the vCPU thread
    sleeps while the guest halts, so this is the guest's work (plus the
    emulation of its devices), comparable between systems of one run."""
    tick = os.sysconf("SC_CLK_TCK")
    # After "(comm)": state ppid pgrp session ...; utime and stime are
    # fields 14 and 15 of the whole line.
    return sum(int(fields[11]) + int(fields[12]) for _, _, fields in _session(guest_or_proc)) / tick


def qemu_pid(guest_or_proc):
    """The QEMU process of the session `boot` started."""
    for pid, comm, _ in _session(guest_or_proc):
        if comm.startswith("qemu-system"):
            return pid
    raise RuntimeError("no QEMU process in the guest's session")


def _session(guest_or_proc):
    """(pid, comm, the /proc/PID/stat fields after "(comm)") of every
    process in the session `boot` started."""
    proc = getattr(guest_or_proc, "proc", guest_or_proc)
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                head, tail = f.read().rsplit(")", 1)
        except OSError:
            continue
        fields = tail.split()
        if int(fields[3]) == proc.pid:
            yield int(pid), head.split("(", 1)[1], fields


def h2load(base, path, clients, seconds, net="tap", rps_per_client=None):
    """Keep-alive load on one URL: req/s and errors (failed, errored or
    timed-out requests, non-2xx answers, clients that did nothing while
    measured). `rps_per_client`: offer that many requests/s per client
    (h2load --rps) instead of as many as the server takes."""
    # slirp: long enough for connects the host dropped to come back (1, 3, 7 s).
    warm_up = (8 if clients > 1 else 1) if net == "slirp" else 2
    try:
        rate = ["--rps", f"{rps_per_client:g}"] if rps_per_client else []
        r = subprocess.run(["h2load", "--h1", "-c", str(clients), "-m", "1", "-t", str(min(clients, 2)), *rate,
                            "-D", str(seconds), "--warm-up-time", str(warm_up), "-T", "10", base + path],
                           capture_output=True, text=True, timeout=seconds + warm_up + 60)
    except subprocess.TimeoutExpired:
        return {"rps": 0.0, "errors": -1}
    o = r.stdout
    m = re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", o)
    if not m:
        return {"rps": 0.0, "errors": -1}
    rps = float(m.group(1))
    m = re.search(r"requests: .* (\d+) failed, (\d+) errored, (\d+) timeout", o)
    errors = sum(int(x) for x in m.groups()) if m else -1
    m = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", o)
    if m:
        errors += sum(int(x) for x in m.groups()[1:])
    m = re.search(r"req/s\s*:\s*([\d.]+)", o)  # the slowest client's rate
    if m and float(m.group(1)) == 0.0:
        errors += 1
    return {"rps": rps, "errors": errors}


_UNITS = {"B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}


def wrk(base, clients, seconds, path=None, close=True, log=None, start=0, threads=2, timeout_s=10, during=None):
    """wrk for `seconds`: `path` (one URL), or `log` (a request log replayed
    by bench/lib/replay.lua: thread t starts at line start + t * 100003,
    each connection takes the next line). close=True sends `Connection:
    close`: one request per connection, the paper's HTTP/1.0 clients (wrk
    reconnects when the server closes). Returns req/s and requests of
    2xx/3xx answers only, bytes read per second (headers and error
    answers included), and errors (socket errors of any kind and
    non-2xx/3xx answers). `during`, if given, is called halfway
    through the run and its result returned as "during"."""
    threads = max(1, min(threads, clients))
    cmd = ["wrk", "-t", str(threads), "-c", str(clients), "-d", f"{seconds}s", "--timeout", f"{timeout_s}s"]
    if log:
        cmd += ["-s", REPLAY, base + "/", "--", log, str(start), "1" if close else "0"]
    else:
        if close:
            cmd += ["-H", "Connection: close"]
        cmd += [base + path]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    mid = None
    if during is not None:
        time.sleep(seconds / 2)
        try:
            mid = during()
        except (OSError, ValueError) as e:
            mid = {"error": repr(e)}
    try:
        o, err = proc.communicate(timeout=seconds + 60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return {"rps": 0.0, "bps": 0.0, "requests": 0, "errors": -1, "during": mid}
    m = re.search(r"Requests/sec:\s*([\d.]+)", o)
    if proc.returncode != 0 or not m:
        return {"rps": 0.0, "bps": 0.0, "requests": 0, "errors": -1, "output": o + err, "during": mid}
    rps = float(m.group(1))
    m = re.search(r"(\d+) requests in ([\d.]+)(\w+), ([\d.]+)(\w+) read", o)
    requests = int(m.group(1)) if m else 0
    secs = float(m.group(2)) * {"s": 1, "ms": 1e-3, "m": 60, "us": 1e-6}.get(m.group(3), 1) if m else seconds
    read = float(m.group(4)) * _UNITS.get(m.group(5), 1) if m else 0.0
    errors = 0
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", o)
    if m:
        errors += sum(int(x) for x in m.groups())
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", o)
    bad = int(m.group(1)) if m else 0
    errors += bad
    if requests == 0:
        errors += 1
    # Only answered requests count: wrk's rate includes error responses
    # (a server out of memory answers 503 fast).
    good = max(0, requests - bad)
    rps = rps * good / requests if requests else 0.0
    return {"rps": rps, "bps": read / secs if secs else 0.0, "requests": good, "errors": errors, "during": mid}


def stats(base, timeout=30, retry_s=0):
    """/cgi-bin/stats as a dict (component -> counter -> value). With
    retry_s, a refused connection (netstack out of sockets while the last
    run's TIME-WAIT sockets expire) is retried for that long."""
    deadline = time.time() + retry_s
    while True:
        try:
            return json.loads(get(base, "/cgi-bin/stats?format=json", timeout)[1])
        except ConnectionRefusedError:
            pass
        except urllib.error.URLError as e:
            if not isinstance(e.reason, ConnectionRefusedError):
                raise
        if time.time() > deadline:
            raise ConnectionRefusedError(f"{base}: /cgi-bin/stats refused for {retry_s} s")
        time.sleep(1)


def memory(s):
    """Bytes of memory the components hold, by name, from a stats reading:
    the file cache (entries) and the fs pool's pages in use (entries plus
    pages evicted but still referenced), httpd's pool (headers, and in
    posix mode the copies of file data), netstack's socket rings and send
    queues (its heap: copies in flash/posix mode), and the cgi's pool; and
    the file cache's budget then, with what fs charged it for."""
    fs, httpd, net, cgi = (s.get(k, {}) for k in ("fs", "httpd", "netstack", "cgi"))
    return {
        "fs_cached": fs.get("bytes_cached", 0),
        "fs_pool": fs.get("pool_pages_in_use", 0) * PAGE,
        "httpd_pool": httpd.get("pages_in_use", 0) * PAGE,
        "net_socket": net.get("tcp_socket_bytes", 0),
        "net_send_queued": net.get("tcp_send_queued_bytes", 0),
        "net_heap": net.get("tcp_heap_used", 0),
        "cgi_pool": cgi.get("pages_in_use", 0) * PAGE,
        # The cache's share of memory (components/fs/src/budget.rs): its
        # budget now and what it was charged for (0 on images without it).
        "fs_budget": fs.get("cache_budget_now", 0),
        "charged_httpd": fs.get("charged_httpd_now", 0),
        "charged_net": fs.get("charged_netstack_now", 0),
        "charged_fs_held": fs.get("charged_fs_held_now", 0),
    }


def fs_delta(a, b):
    """The file cache's traffic between two stats readings."""
    fa, fb = a.get("fs", {}), b.get("fs", {})
    d = {k: fb.get(k, 0) - fa.get(k, 0) for k in ("cache_hits", "cache_misses", "disk_reads", "disk_bytes",
                                                 "evictions", "evictions_referenced")}
    looked = d["cache_hits"] + d["cache_misses"]
    d["hit_rate"] = d["cache_hits"] / looked if looked else float("nan")
    return d


def cell(values):
    """Median and spread (max-min, % of the median) of a list of numbers."""
    vs = [v for v in values if v is not None]
    if not vs:
        return None
    med = statistics.median(vs)
    return {"median": med, "min": min(vs), "max": max(vs), "n": len(vs),
            "spread": (max(vs) - min(vs)) / med * 100 if med else 0.0}


def write_report(out, lines, data):
    """Prints the report `lines` and writes them to OUT.txt, `data` to
    OUT.json."""
    text = "\n".join(lines)
    print(text)
    with open(out + ".txt", "w") as f:
        f.write(text + "\n")
    with open(out + ".json", "w") as f:
        json.dump(data, f, indent=1)


def pyplot():
    """matplotlib.pyplot (Agg), or None when it is not in the venv."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except ImportError:
        print("(no matplotlib in the venv: no plot; see python-requirements.txt)")
        return None
