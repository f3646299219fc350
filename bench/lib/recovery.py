"""bench/recovery's driver: per component, boot the recovery image, run
keep-alive clients that check every body, inject a fault at a set time,
and report what the clients saw and what the system holds afterwards.

usage: recovery.py OUT BUILD_DIR ROUNDS SECONDS FAULT_AT HANG_AT CLIENTS COMPONENT...

The clients are tests/lib/RecoveryClient.py's (one keep-alive connection
per thread, files fetched in turn, size and SHA-256 checked against the
site manifest, a failed request reconnects); the fault is the test images'
console command (`iolite-inject fault NAME`, roottask/src/inject.rs), the
same as the Robot keyword `Inject Fault Into`. Per run: requests, failed
requests (on connections open at the fault and opened after it), the
longest time without a completed response near the fault (0.5 s before to
2 s after) and over the whole run, when new connections were served
again: "clients back", from the command to the first response on a
connection a load client opened after it (they reconnect once theirs
failed, so this includes how long they took to notice: for a netstack
fault, their own retransmission timeout), "probe", from the supervisor's
FAULT line to the first response to a probe (a fresh connection every 50
ms) started after that line, and "probe gap", the longest time between
two probe responses near the fault (what a new visitor waited), pool pages
in use before (after 2 s of the same load, so at its steady state) and
after (fs, httpd, netstack's header and socket pools, netdrv's receive
pool, read from /cgi-bin/stats 5 s after the load stopped, once the death
settled), the components restarted, and the root task's free untyped
memory after the restart.

Each boot takes two events: the fault at FAULT_AT and, at HANG_AT (0: no
hang), a hang of the same component (`iolite-inject hang NAME`, the Robot
keyword `Make Component Hang`): its thread spins without progress until
the supervisor's stuck verdict restarts it. Per event: the time from the
console command to the supervisor's `restarted component NAME` line (the
serial log polled every 10 ms from the host: restart time for a fault,
detection and restart for a hang), the requests that failed in its
window (from the event to the next one, or the end), and the gap near it.
One boot for both keeps the full form within 30 minutes on a 2-core
host; the pools "after" are read after both restarts.

With ROUNDS > 1 the tables show the median and, in brackets, the lowest
and highest value over the rounds.
"""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
sys.path.insert(0, os.path.join(ROOT, "bench", "lib"))
import iolitebench as B  # noqa: E402
from RecoveryClient import RecoveryClient  # noqa: E402

out, build, rounds, seconds, fault_at, hang_at, clients = sys.argv[1:8]
rounds, seconds, fault_at, hang_at, clients = int(rounds), float(seconds), float(fault_at), float(hang_at), int(clients)
components = sys.argv[8:]
FILES = ["/index.html", "/file-16k.bin", "/style.css", "/file-64k.bin", "/odd-100000.bin", "/file-1k.txt"]
# Dynamic requests in the same round-robin: a POST of 2 KiB each client
# makes, echoed back by the cgi after its environment and checked byte for
# byte (one request in seven). Not /cgi-bin/stream: the cgi runs at most 8
# streams at once and 16 clients would meet its 503.
CGI = ["POST /cgi-bin/echo?load"]
LOAD = FILES[:3] + CGI + FILES[3:]
MANIFEST = os.path.join(build, "images", "site.manifest")


def pools(s):
    """Pool pages in use, by pool, from a stats reading."""
    fs, httpd, net, drv = (s.get(k, {}) for k in ("fs", "httpd", "netstack", "netdrv"))
    return {"fs": fs.get("pool_pages_in_use"), "httpd": httpd.get("pool_pages_in_use"),
            "net_hdr": net.get("tcp_hdr_pool_pages_in_use"), "net_sock": net.get("tcp_sock_pool_pages_in_use"),
            "drv_rx": drv.get("drv_rx_pool_pages_in_use")}


class RestartWatch:
    """Reads the serial log as it grows (every 10 ms) and notes when each
    supervisor line `restarted component NAME` and `FAULT in component
    NAME` reached the host (through the log server: the times are upper
    bounds)."""

    def __init__(self, path, component):
        self.path, self.pattern = path, re.compile(rf"^\[supervisor\] restarted component {re.escape(component)} ", re.M)
        self.fault_pattern = re.compile(rf"^\[supervisor\] FAULT in component {re.escape(component)}: ", re.M)
        self.seen, self.faults, self.stop = [], [], threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        text, pos = "", 0
        while not self.stop.is_set():
            with open(self.path, "rb") as f:
                f.seek(pos)
                raw = f.read()
            if raw:
                pos += len(raw)
                # Only whole lines are matched. Lines the root task prints
                # directly (while log is down) go through the debug kernel,
                # which ends "\n" with "\r": the next line starts with it.
                text += raw.decode(errors="replace").replace("\r", "")
                lines = text.split("\n")
                text = lines.pop()
                now = time.monotonic()
                self.seen += [now for line in lines if self.pattern.match(line)]
                self.faults += [now for line in lines if self.fault_pattern.match(line)]
            time.sleep(0.01)

    def nth(self, i):
        """When the `i`-th restart line (from 0) was seen, or None."""
        return self.seen[i] if i < len(self.seen) else None

    def close(self):
        self.stop.set()
        self.thread.join(timeout=5)


def run(component):
    port = B.free_port()
    log = tempfile.NamedTemporaryFile(prefix=f"recovery-{component}-", suffix=".log", delete=False)
    proc = subprocess.Popen([os.path.join(build, "simulate"), "--port", f"{port}:80", "--disk",
                             os.path.join(build, "images", "site.img")],
                            stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 240
        while True:
            try:
                if B.get(base, "/", 3)[0] == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline or proc.poll() is not None:
                raise RuntimeError(f"no answer from the image (serial log {log.name})")
            time.sleep(1)
        # Warm with 2 s of the load itself, so that before and after
        # compare like with like: the cache and httpd's header cache hold
        # the files, and the pools are at the load's steady state (httpd
        # keeps one page more after its first load than after single
        # requests; further loads leave it there).
        load = RecoveryClient(port)
        load.start_static_load(MANIFEST, clients, *LOAD)
        time.sleep(2)
        load.stop_static_load()
        time.sleep(1)
        B.stats(base)
        before = B.stats(base)
        # netstack's fault ends its connections without a word to their
        # peers: its clients give up after 3 s (everyone else's after 30).
        load.start_static_load(MANIFEST, clients, *LOAD, timeout=3 if component == "netstack" else 30)
        # A fresh connection every 50 ms: when new connections are served,
        # whatever the keep-alive clients notice of the fault.
        load.start_connection_probe(MANIFEST, "/index.html")
        t0 = time.monotonic()
        events = [("fault", fault_at)] + ([("hang", hang_at)] if hang_at > 0 else [])
        watch = RestartWatch(log.name, component)
        sent = {}
        for name, at in events:
            time.sleep(max(0.0, at - (time.monotonic() - t0)))
            load.mark_load_time(name)
            sent[name] = time.monotonic()
            proc.stdin.write(f"iolite-inject {name} {component}\n".encode())
            proc.stdin.flush()
        time.sleep(max(0.0, seconds - (time.monotonic() - t0)))
        # The fault takes effect at the supervisor's next tick (up to 62 ms
        # after the command), so a probe started just after the command
        # may still be served by the old incarnation: new connections are
        # judged from the supervisor's FAULT line instead.
        if watch.faults:
            load.mark_load_time("death", at=watch.faults[0])
        r = load.stop_static_load()
        with load.lock:
            failures = list(load.failures)  # (time, what, connection opened)
        # The death settles once the peers let go of what the dead
        # incarnation shared: give it a few seconds without load.
        time.sleep(5)
        # Each event restarts the component once: the i-th restart line is
        # the i-th event's (a late line may come after the next command).
        restart_s = {}
        for i, (name, _) in enumerate(events):
            if watch.nth(i) is not None:
                restart_s[name] = watch.nth(i) - sent[name]
        after = B.stats(base, retry_s=10)
        # Lines held back by the load come once it stopped.
        watch.close()
        with open(log.name, errors="replace") as f:
            serial = f.read().replace("\r", "")
        restarted = re.findall(r"^\[supervisor\] restarted component (\S+)", serial, re.M)
        untyped = re.findall(rf"^\[supervisor\] memory after restarting {re.escape(component)}: (\d+) bytes", serial, re.M)
        faulted = re.search(rf"^\[supervisor\] FAULT in component {re.escape(component)}: .*ip 0xbad$", serial, re.M)
        marks = [load.marks[n] for n, _ in events] + [float("inf")]
        stuck = re.search(rf"^\[supervisor\] component {re.escape(component)} is stuck: (\d+) ms of CPU", serial, re.M)
        res = {
            "component": component,
            "faulted": bool(faulted),
            "requests": r["requests"],
            # Within the fault's window (until the hang, if any).
            "failed_open_at_fault": sum(1 for t, _, o, *_ in failures if marks[0] <= t < marks[1] and o <= marks[0]),
            "failed_opened_after": sum(1 for t, _, o, *_ in failures if marks[0] <= t < marks[1] and o > marks[0]),
            # CGI requests that failed in the fault's window, and how many
            # httpd had in flight at the cgi's first death (its "cgi died"
            # line): equal when only the requests in flight failed. (Not
            # "sent before the command": the fault takes effect at the
            # supervisor's next tick, up to 62 ms later.)
            "failed_cgi": sum(1 for t, what, *_ in failures if marks[0] <= t < marks[1] and "/cgi-bin/" in what),
            "cgi_in_flight_at_death": int(m.group(1)) if (m := re.search(
                r"^\[httpd\] cgi died \(death 1\): (\d+) requests failed with 502", serial, re.M)) else 0,
            "cgi_requests": len(load.cgi_done),
            "gap_near_fault_ms": r.get("gap_near_fault_ms"),
            "gap_ms": r["gap_ms"],
            "first_new_served_ms": r.get("first_new_connection_served_after_fault_ms"),
            "probe_served_ms": r.get("probe_served_after_death_ms"),
            "probe_gap_ms": r.get("probe_gap_near_fault_ms"),
            "pools_before": pools(before),
            "pools_after": pools(after),
            "restarted": restarted,
            "untyped_after": [int(x) for x in untyped],
        }
        for i, (name, _) in enumerate(events):
            res[f"{name}_restart_ms"] = round(restart_s[name] * 1000) if name in restart_s else None
            res[f"{name}_failed"] = sum(1 for t, *_ in failures if marks[i] <= t < marks[i + 1])
            res[f"gap_near_{name}_ms"] = r.get(f"gap_near_{name}_ms")
        res["stuck_cpu_ms"] = int(stuck.group(1)) if stuck else None
        return res
    finally:
        B.stop(proc)


results = []
for rnd in range(rounds):
    for c in components:
        hang = f", hang at {hang_at:.0f} s" if hang_at > 0 else ""
        print(f"==> round {rnd + 1}/{rounds}: fault in {c} at {fault_at:.0f} s{hang} of {seconds:.0f} s", flush=True)
        try:
            res = run(c)
        except (OSError, RuntimeError, AssertionError) as e:
            print(f"  {c}: {e!r}; skipped", flush=True)
            continue
        res["round"] = rnd + 1
        results.append(res)
        print(f"  {c}: {res['requests']} requests, failed {res['failed_open_at_fault']} (open at the fault) + "
              f"{res['failed_opened_after']} (opened after); gap near the fault {res['gap_near_fault_ms']} ms; "
              f"restarted {res['restarted']}; restart {res.get('fault_restart_ms')} ms after the fault,"
              f" {res.get('hang_restart_ms')} ms after the hang ({res.get('hang_failed')} failed)", flush=True)


def vals(c, key):
    return [r[key] for r in results if r["component"] == c and r.get(key) is not None]


def med(c, key):
    v = vals(c, key)
    return statistics.median(v) if v else None


def cell(c, key, unit=""):
    """The median, and with several rounds the lowest and highest: `12 [9-15]`."""
    v = vals(c, key)
    if not v:
        return "-"
    m = f"{statistics.median(v):.0f}{unit}"
    return m if len(v) < 2 else f"{m} [{min(v):.0f}-{max(v):.0f}]"


def pools_cell(c, when):
    rs = [r for r in results if r["component"] == c]
    if not rs:
        return "-"
    p = rs[-1][when]
    return "/".join("-" if p[k] is None else str(p[k]) for k in ("fs", "httpd", "net_hdr", "net_sock", "drv_rx"))


spread = " [lowest-highest]" if rounds > 1 else ""
lines = [f"recovery: {clients} keep-alive clients fetch {len(FILES)} files and POST to /cgi-bin/echo in turn (every"
         " body checked; CGI: of the requests, those answered by the cgi; CGI failed: CGI requests that failed after"
         " the fault; in flight: the CGI requests httpd had at the cgi for its first death, from its `cgi died`"
         " line), the fault"
         f" injected at {fault_at:.0f} s" + (f", a hang at {hang_at:.0f} s" if hang_at > 0 else "")
         + f" of {seconds:.0f} s; {rounds} round(s), medians{spread}; pools: pages in use"
         " fs/httpd/netstack hdr/netstack sock/netdrv rx (last round), read 5 s after the load", ""]
w = 9 if rounds < 2 else 15
hdr = (f"{'fault':11} | {'requests':>{w + 2}} | {'CGI':>{w}} | {'failed at':>{w}} | {'CGI failed':>{w}} |"
       f" {'in flight':>{w}} |"
       f" {'failed new':>{w}} | {'gap near':>{w + 3}} |"
       f" {'restart line':>{w + 3}} | {'clients back':>{w + 3}} | {'probe':>{w + 3}} | {'probe gap':>{w + 3}} |"
       f" {'others restarted':>16} |"
       " pools before -> after")
lines += [hdr, "-" * len(hdr)]
for c in components:
    rs = [r for r in results if r["component"] == c]
    if not rs:
        lines.append(f"{c:11} | (no run)")
        continue
    others = sorted({x for r in rs for x in r["restarted"] if x != c and x != "cgi"})
    cgi_extra = any(x == "cgi" for r in rs for x in r["restarted"]) and c != "cgi"
    lines.append(f"{c:11} | {cell(c, 'requests'):>{w + 2}} | {cell(c, 'cgi_requests'):>{w}} |"
                 f" {cell(c, 'failed_open_at_fault'):>{w}} | {cell(c, 'failed_cgi'):>{w}} |"
                 f" {cell(c, 'cgi_in_flight_at_death'):>{w}} |"
                 f" {cell(c, 'failed_opened_after'):>{w}} | {cell(c, 'gap_near_fault_ms', ' ms'):>{w + 3}} |"
                 f" {cell(c, 'fault_restart_ms', ' ms'):>{w + 3}} | {cell(c, 'first_new_served_ms', ' ms'):>{w + 3}} |"
                 f" {cell(c, 'probe_served_ms', ' ms'):>{w + 3}} | {cell(c, 'probe_gap_ms', ' ms'):>{w + 3}} |"
                 f" {(', '.join(others) or 'none') + (' (+cgi)' if cgi_extra else ''):>16} |"
                 f" {pools_cell(c, 'pools_before')} -> {pools_cell(c, 'pools_after')}")
if hang_at > 0:
    lines += ["", "hang: detect+restart = from the command to the supervisor's restart line reaching the host; failed ="
              " requests that failed from the hang to the end of the run", ""]
    hdr = (f"{'hang':11} | {'detect+restart':>{w + 3}} | {'stuck CPU':>{w + 3}} | {'failed':>{w}} |"
           f" {'gap near':>{w + 3}} | no restart line seen")
    lines += [hdr, "-" * len(hdr)]
    for c in components:
        rs = [r for r in results if r["component"] == c]
        if not rs:
            lines.append(f"{c:11} | (no run)")
            continue
        missed = sum(1 for r in rs if r.get("hang_restart_ms") is None)
        lines.append(f"{c:11} | {cell(c, 'hang_restart_ms', ' ms'):>{w + 3}} | {cell(c, 'stuck_cpu_ms', ' ms'):>{w + 3}} |"
                     f" {cell(c, 'hang_failed'):>{w}} | {cell(c, 'gap_near_hang_ms', ' ms'):>{w + 3}} |"
                     f" {missed} of {len(rs)}")
lines += ["", "clients back: from the command to the first response on a connection a load client opened after it"
          " (after noticing the failure of its own); probe: from the supervisor's FAULT line reaching the host to"
          " the response to the first probe (a new connection every 50 ms) started after it; probe gap: the longest"
          " time between two probe responses near the fault."]
lines += ["", "restart times: from the command to the supervisor's line reaching the host through the log server"
          " (above the data path, so late by at most its queue). The gap near the event is what the clients saw;"
          " stuck CPU is the supervisor's own count. A hung component below the load (the cgi) gets CPU only in"
          " the windows httpd lends it while CGI requests wait, and liveness counts CPU time; `-`: no restart line"
          " seen until the stats were read, 5 s after the load."]
untyped = sorted({u for r in results for u in r["untyped_after"]})
lines += ["", f"free untyped memory reported after the restarts (bytes): {untyped}"]
text = "\n".join(lines)
print(text)
with open(out + ".txt", "w") as f:
    f.write(text + "\n")
with open(out + ".json", "w") as f:
    json.dump({"rounds": rounds, "seconds": seconds, "fault_at": fault_at, "hang_at": hang_at, "clients": clients, "load": LOAD,
               "results": results}, f, indent=1)
