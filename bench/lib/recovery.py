"""bench/recovery's driver: per component, boot the recovery image, run
keep-alive clients that check every body, inject a fault at a set time,
and report what the clients saw and what the system holds afterwards.

usage: recovery.py OUT BUILD_DIR ROUNDS SECONDS FAULT_AT CLIENTS COMPONENT...

The clients are tests/lib/RecoveryClient.py's (one keep-alive connection
per thread, files fetched in turn, size and SHA-256 checked against the
site manifest, a failed request reconnects); the fault is the test images'
console command (`iolite-inject fault NAME`, roottask/src/inject.rs), the
same as the Robot keyword `Inject Fault Into`. Per run: requests, failed
requests (on connections open at the fault and opened after it), the
longest time without a completed response near the fault (0.5 s before to
2 s after) and over the whole run, the first new connection served after
the fault (by the keep-alive clients, which reconnect once theirs failed,
and by a probe that opens a fresh connection every 50 ms), pool pages in use before (after every file was fetched once)
and after (fs, httpd, netstack's header and socket pools, netdrv's
receive pool, read from /cgi-bin/stats 5 s after the load stopped, once
the death settled), the components restarted,
and the root task's free untyped memory after the restart.
"""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
sys.path.insert(0, os.path.join(ROOT, "bench", "lib"))
import iolitebench as B  # noqa: E402
from RecoveryClient import RecoveryClient  # noqa: E402

out, build, rounds, seconds, fault_at, clients = sys.argv[1:7]
rounds, seconds, fault_at, clients = int(rounds), float(seconds), float(fault_at), int(clients)
components = sys.argv[7:]
FILES = ["/index.html", "/file-16k.bin", "/style.css", "/file-64k.bin", "/odd-100000.bin", "/file-1k.txt"]
MANIFEST = os.path.join(build, "images", "site.manifest")


def pools(s):
    """Pool pages in use, by pool, from a stats reading."""
    fs, httpd, net, drv = (s.get(k, {}) for k in ("fs", "httpd", "netstack", "netdrv"))
    return {"fs": fs.get("pool_pages_in_use"), "httpd": httpd.get("pool_pages_in_use"),
            "net_hdr": net.get("tcp_hdr_pool_pages_in_use"), "net_sock": net.get("tcp_sock_pool_pages_in_use"),
            "drv_rx": drv.get("drv_rx_pool_pages_in_use")}


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
        # Warm: every file once (the cache and httpd's header cache hold
        # them), so that before and after compare like with like.
        for path in FILES:
            B.get(base, path, 30)
        B.stats(base)
        before = B.stats(base)
        load = RecoveryClient(port)
        # netstack's fault ends its connections without a word to their
        # peers: its clients give up after 3 s (everyone else's after 30).
        load.start_static_load(MANIFEST, clients, *FILES, timeout=3 if component == "netstack" else 30)
        # A fresh connection every 50 ms: when new connections are served,
        # whatever the keep-alive clients notice of the fault.
        load.start_connection_probe(MANIFEST, "/index.html")
        time.sleep(fault_at)
        load.mark_load_time("fault")
        proc.stdin.write(f"iolite-inject fault {component}\n".encode())
        proc.stdin.flush()
        time.sleep(max(0.0, seconds - fault_at))
        r = load.stop_static_load()
        # The death settles once the peers let go of what the dead
        # incarnation shared: give it a few seconds without load.
        time.sleep(5)
        after = B.stats(base, retry_s=10)
        with open(log.name, errors="replace") as f:
            serial = f.read()
        restarted = re.findall(r"^\[supervisor\] restarted component (\S+)", serial, re.M)
        untyped = re.findall(rf"^\[supervisor\] memory after restarting {re.escape(component)}: (\d+) bytes", serial, re.M)
        faulted = re.search(rf"^\[supervisor\] FAULT in component {re.escape(component)}: .*ip 0xbad$", serial, re.M)
        return {
            "component": component,
            "faulted": bool(faulted),
            "requests": r["requests"],
            "failed_open_at_fault": r.get("failed_on_connections_open_at_fault"),
            "failed_opened_after": r.get("failed_on_connections_opened_after_fault"),
            "gap_near_fault_ms": r.get("gap_near_fault_ms"),
            "gap_ms": r["gap_ms"],
            "first_new_served_ms": r.get("first_new_connection_served_after_fault_ms"),
            "probe_served_ms": r.get("probe_served_after_fault_ms"),
            "pools_before": pools(before),
            "pools_after": pools(after),
            "restarted": restarted,
            "untyped_after": [int(x) for x in untyped],
        }
    finally:
        B.stop(proc)


results = []
for rnd in range(rounds):
    for c in components:
        print(f"==> round {rnd + 1}/{rounds}: fault in {c} at {fault_at:.0f} s of {seconds:.0f} s", flush=True)
        try:
            res = run(c)
        except (OSError, RuntimeError, AssertionError) as e:
            print(f"  {c}: {e!r}; skipped", flush=True)
            continue
        res["round"] = rnd + 1
        results.append(res)
        print(f"  {c}: {res['requests']} requests, failed {res['failed_open_at_fault']} (open at the fault) + "
              f"{res['failed_opened_after']} (opened after); gap near the fault {res['gap_near_fault_ms']} ms; "
              f"restarted {res['restarted']}", flush=True)


def med(c, key):
    vals = [r[key] for r in results if r["component"] == c and r.get(key) is not None]
    return statistics.median(vals) if vals else None


def pools_cell(c, when):
    rs = [r for r in results if r["component"] == c]
    if not rs:
        return "-"
    p = rs[-1][when]
    return "/".join("-" if p[k] is None else str(p[k]) for k in ("fs", "httpd", "net_hdr", "net_sock", "drv_rx"))


lines = [f"recovery: {clients} keep-alive clients fetch {len(FILES)} files in turn (every body checked), the fault"
         f" injected at {fault_at:.0f} s of {seconds:.0f} s; {rounds} round(s), medians; pools: pages in use"
         " fs/httpd/netstack hdr/netstack sock/netdrv rx (last round), read 5 s after the load", ""]
hdr = (f"{'component':11} | {'requests':>8} | {'failed at':>9} | {'failed new':>10} | {'gap near':>8} | {'gap all':>7} |"
       f" {'new conn':>8} | {'probe':>7} | {'others restarted':>16} | pools before -> after")
lines += [hdr, "-" * len(hdr)]
for c in components:
    rs = [r for r in results if r["component"] == c]
    if not rs:
        lines.append(f"{c:11} | (no run)")
        continue
    others = sorted({x for r in rs for x in r["restarted"] if x != c and x != "cgi"})
    cgi_extra = any(x == "cgi" for r in rs for x in r["restarted"]) and c != "cgi"

    def fmt(v, unit=""):
        return "-" if v is None else f"{v:.0f}{unit}"
    lines.append(f"{c:11} | {fmt(med(c, 'requests')):>8} | {fmt(med(c, 'failed_open_at_fault')):>9} |"
                 f" {fmt(med(c, 'failed_opened_after')):>10} | {fmt(med(c, 'gap_near_fault_ms'), ' ms'):>8} |"
                 f" {fmt(med(c, 'gap_ms'), ' ms'):>7} | {fmt(med(c, 'first_new_served_ms'), ' ms'):>8} |"
                 f" {fmt(med(c, 'probe_served_ms'), ' ms'):>7} |"
                 f" {(', '.join(others) or 'none') + (' (+cgi)' if cgi_extra else ''):>16} |"
                 f" {pools_cell(c, 'pools_before')} -> {pools_cell(c, 'pools_after')}")
untyped = sorted({u for r in results for u in r["untyped_after"]})
lines += ["", f"free untyped memory reported after the restarts (bytes): {untyped}"]
text = "\n".join(lines)
print(text)
with open(out + ".txt", "w") as f:
    f.write(text + "\n")
with open(out + ".json", "w") as f:
    json.dump({"rounds": rounds, "seconds": seconds, "fault_at": fault_at, "clients": clients, "files": FILES,
               "results": results}, f, indent=1)
