"""bench/manylarge, inside the namespace: see that script.

usage: manylarge.py OUT SITE ROUNDS SECONDS CLIENTS SYSTEMS...
"""
import collections
import hashlib
import http.client
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import iolitebench as B  # noqa: E402

out, site, rounds, seconds, clients = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
systems = sys.argv[6:]
ours = [s for s in systems if s != "linux"]
manifest = B.load_manifest(os.path.join(site, "site.manifest"))
# Each client its own file: the largest ones, so that together they pass
# the file pool.
files = sorted(manifest, key=lambda p: -manifest[p][0])[:clients]
total = sum(manifest[p][0] for p in files)
HTTPD = ("file_opens_deferred", "file_reads_deferred", "file_opens_expired")
B.tap_up()


def load(base):
    """The clients for `seconds`; returns (responses right, bytes, failures
    by kind, elapsed)."""
    ok, nbytes, bad = [0], [0], collections.Counter()
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def client(path):
        size, sha = manifest[path]
        conn = None
        while time.monotonic() < stop:
            try:
                if conn is None:
                    conn = http.client.HTTPConnection(base.split("//")[1], 80, timeout=30)
                conn.request("GET", path)
                r = conn.getresponse()
                body = r.read()
                right = r.status == 200 and len(body) == size and hashlib.sha256(body).hexdigest() == sha
                with lock:
                    if right:
                        ok[0] += 1
                        nbytes[0] += len(body)
                    else:
                        bad[f"status {r.status}" if r.status != 200 else "wrong bytes"] += 1
            except Exception as e:  # noqa: BLE001 - every failure counts
                with lock:
                    bad[type(e).__name__] += 1
                if conn is not None:
                    conn.close()
                conn = None
                time.sleep(0.2)
        if conn is not None:
            conn.close()

    threads = [threading.Thread(target=client, args=(p,)) for p in files]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return ok[0], nbytes[0], bad, time.monotonic() - t0


def med(values, spread=False, digits=False):
    """The median (and +-spread) of the rounds' values, as text."""
    c = B.cell(values)
    if c is None:
        return "-"
    text = f"{c['median']:.1f}" if spread or digits else f"{c['median']:.0f}"
    return f"{text} ±{c['spread']:.0f}%" if spread else text


results = []
for rnd in range(1, rounds + 1):
    for system in systems:
        print(f"==> round {rnd}/{rounds}: {system}", flush=True)
        g = B.boot(system, disk=os.path.join(site, "site.img"), simulate_from=ours[0] if ours else "iolite",
                   linux=os.path.join(B.ROOT, "build", "bench-linux-trace"))
        try:
            before = B.stats(g.base) if system != "linux" else None
            mid = {}
            if system != "linux":
                def halfway():
                    time.sleep(seconds / 2)
                    mid.update(B.memory(B.stats(g.base)))
                threading.Thread(target=halfway, daemon=True).start()
            ok, nbytes, bad, el = load(g.base)
            r = {"round": rnd, "system": system, "rps": ok / el, "mbps": nbytes / el / 1e6, "ok": ok,
                 "bad": dict(bad)}
            if system != "linux":
                after = B.stats(g.base)
                r.update({k: after["httpd"].get(k, 0) - before["httpd"].get(k, 0) for k in HTTPD})
                r["fs_pool_kib"] = mid.get("fs_pool", 0) // 1024
                r["net_queued_kib"] = mid.get("net_send_queued", 0) // 1024
                r["copied"] = after["httpd"].get("bytes_copied", 0) + after["netdrv"].get("bytes_copied", 0)
            print(f"  {system}: {r['rps']:.1f} req/s {r['mbps']:.1f} MB/s, {ok} right, failed {dict(bad)}"
                  + ("" if system == "linux" else
                     f", opens waited {r['file_opens_deferred']}, reads waited {r['file_reads_deferred']},"
                     f" 503 after waiting {r['file_opens_expired']}"), flush=True)
            results.append(r)
        finally:
            B.stop(g)

lines = [f"manylarge: {clients} keep-alive clients, each its own file of bench/trace's site (the {clients} largest, "
         f"{total / 1e6:.1f} MB together; file pool 8 MiB, cache budget 4 MiB), {seconds:.0f} s, TAP, "
         f"every body's SHA-256 checked; {rounds} round(s); medians, ±spread of req/s", ""]
lines.append(f"{'system':>20} | {'req/s':>14} | {'MB/s':>6} | {'failed (all rounds)':>28} | "
             f"{'opens waited':>12} | {'reads waited':>12} | {'503 waited':>10} | {'fs pool KiB':>11} | queued KiB")
for system in systems:
    rs = [r for r in results if r["system"] == system]
    bad = collections.Counter()
    for r in rs:
        bad.update(r["bad"])
    failed = ", ".join(f"{v} {k}" for k, v in sorted(bad.items())) or "0"
    row = f"{system:>20} | {med([r['rps'] for r in rs], True):>14} | {med([r['mbps'] for r in rs], digits=True):>6} | " \
          f"{failed:>28}"
    if system != "linux":
        row += " | " + " | ".join(f"{med([r[k] for r in rs]):>{w}}" for k, w in (
            ("file_opens_deferred", 12), ("file_reads_deferred", 12), ("file_opens_expired", 10),
            ("fs_pool_kib", 11), ("net_queued_kib", 10)))
    lines.append(row)
B.write_report(out, lines, results)
