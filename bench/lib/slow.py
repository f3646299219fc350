"""bench/slow, inside the namespace: see that script.

usage: slow.py OUT ROUNDS SECONDS WARMUP CLIENTS DATASET RATE "N1 N2 ..." SYSTEMS...
"""
import json
import os
import random
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import iolitebench as B  # noqa: E402

out, rounds, seconds, warmup, clients = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
dsi, rate, slow_ns, systems = int(sys.argv[6]), int(sys.argv[7]), [int(x) for x in sys.argv[8].split()], sys.argv[9:]
SITE = os.path.join(B.ROOT, "build", "bench-sites", "trace")
with open(os.path.join(SITE, "trace.json")) as f:
    trace = json.load(f)
ds = trace["datasets"][dsi]
manifest = B.load_manifest(os.path.join(SITE, "site.manifest"))
# The slow clients' documents: the data set's largest files, those of at
# least 64 KiB (T_ss in the paper), client i starting at the i-th.
LARGE = [p for p in ds["largest"] if manifest[p][0] >= 65536] or ds["largest"][:1]
ours = [s for s in systems if s != "linux"]
B.tap_up()


def start_slow(n, status):
    if n == 0:
        return None
    return subprocess.Popen([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "slowclients.py"),
                             B.GUEST, str(n), str(rate), status, os.path.join(SITE, "site.manifest"), *LARGE],
                            stdin=subprocess.DEVNULL)


def slow_status(status):
    try:
        with open(status) as f:
            lines = f.read().splitlines()
        return json.loads(lines[-1]) if lines else {}
    except (OSError, ValueError):
        return {}


def stop_slow(p):
    if p is None:
        return
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


results = []
for rnd in range(1, rounds + 1):
    for system in systems:
        for n in slow_ns:
            print(f"==> round {rnd}/{rounds}: {system}, {n} slow clients", flush=True)
            g = B.boot(system, disk=os.path.join(SITE, "site.img"), simulate_from=ours[0] if ours else "iolite",
                       linux=os.path.join(B.ROOT, "build", "bench-linux-trace"))
            status = f"{g.log}.slow"
            p = None
            r = {"round": rnd, "system": system, "slow": n}
            try:
                p = start_slow(n, status)
                # Every slow client connected and its first response begun
                # (its window then stays nearly closed), or 15 s.
                deadline = time.time() + 15
                while n and time.time() < deadline:
                    s = slow_status(status)
                    if s.get("connected", 0) >= n and s.get("started", 0) >= n:
                        break
                    time.sleep(0.5)
                log = os.path.join(SITE, ds["log"])

                def try_(f):
                    try:
                        return f(), None
                    except (OSError, AssertionError, ValueError) as e:
                        return None, repr(e)
                # Bytes check before and after; a server that pinned all its
                # memory for the slow clients may not answer: that is
                # recorded, and the fast clients run all the same.
                sample = [LARGE[0], trace["files"][trace["order"][random.Random(rnd).randrange(ds["files"])]]["path"]]
                _, r["check_before"] = try_(lambda: [B.check_bytes(g.base, q, *manifest[q], timeout=5) for q in sample])
                if warmup and not r["check_before"]:
                    B.wrk(g.base, clients, warmup, log=log, close=False, start=0)
                before, _ = try_(lambda: B.stats(g.base, 8)) if system != "linux" else (None, None)
                w = B.wrk(g.base, clients, seconds, log=log, close=False, start=50000 * rnd,
                          during=(lambda: B.stats(g.base, 8)) if system != "linux" else None)
                after, _ = try_(lambda: B.stats(g.base, 8)) if system != "linux" else (None, None)
                _, r["check_after"] = try_(lambda: B.check_bytes(g.base, LARGE[0], *manifest[LARGE[0]], timeout=5))
                r.update(rps=w["rps"], mbs=w["bps"] / 1e6, errors=w["errors"], requests=w["requests"])
                if before is not None and after is not None:
                    d = B.fs_delta(before, after)
                    r.update(hit_rate=d["hit_rate"], disk_reads=d["disk_reads"])
                    # Where the CPU went: busy TSC cycles per fast request
                    # of the components that count them (netdrv's include
                    # QEMU's device emulation behind its MMIO exits).
                    if w["requests"]:
                        r["kcycles_per_request"] = {
                            comp: (after.get(comp, {}).get(key, 0) - before.get(comp, {}).get(key, 0))
                            / w["requests"] / 1000
                            for comp, key in (("netdrv", "drv_busy_cycles"), ("netstack", "tcp_busy_cycles"))}
                if isinstance(w.get("during"), dict) and "fs" in w["during"]:
                    r["memory"] = B.memory(w["during"])
                    h = w["during"].get("httpd", {})
                    r.update(httpd_5xx=h.get("responses_5xx"), file_reads_deferred=h.get("file_reads_deferred"))
            except (OSError, AssertionError, ValueError) as e:
                print(f"  {system} {n} slow: {e!r}; skipped", flush=True)
                r.update(rps=None, errors=-1)
            finally:
                stop_slow(p)
                r["slow_status"] = slow_status(status)
                B.stop(g)
            results.append(r)
            ss = r["slow_status"]
            mem = r.get("memory")
            print(f"  {system:8} slow {n:3}: {r.get('rps') or 0:7.1f} req/s errors {r['errors']}"
                  + (f" hit {r['hit_rate'] * 100:4.1f}%" if "hit_rate" in r else "")
                  + (f" fs pool {mem['fs_pool'] // 1024} KiB httpd {mem['httpd_pool'] // 1024} KiB net"
                     f" {mem['net_socket'] // 1024}+{mem['net_send_queued'] // 1024} KiB" if mem else "")
                  + ("; kcycles/request " + " ".join(f"{k} {v:.0f}" for k, v in r["kcycles_per_request"].items())
                     if r.get("kcycles_per_request") else "")
                  + (f"; checks: {r.get('check_before') or 'ok'}/{r.get('check_after') or 'ok'}")
                  + (f"; slow: {ss.get('connected')} connected, {ss.get('completed')} done, {ss.get('bytes')} B,"
                     f" bad {ss.get('bad')}, errors {ss.get('errors')} {ss.get('last_error', '')}" if n else ""), flush=True)


def med(system, n, key, sub=None):
    vals = [(r.get(key) or {}).get(sub) if sub else r.get(key) for r in results
            if r["system"] == system and r["slow"] == n]
    return B.cell([v for v in vals if v is not None])


lines = [f"{os.path.basename(out)}: data set {ds['files']} files ({ds['bytes'] / 1e6:.1f} MB) replayed by {clients}"
         f" keep-alive clients (warm-up {warmup} s, {seconds} s measured) while N slow clients each fetch"
         f" documents of >= 64 KiB ({len(LARGE)} of them) through a 2 KiB receive buffer at {rate} B/s;"
         f" TAP, {B.disk_note()}; {rounds} round(s); medians", "",
         "fast clients' req/s (±spread), and memory held halfway (KiB): fs pool / httpd pool / netstack socket"
         " rings + send queues"]
W = 44
hdr = f"{'N':>4} | " + " | ".join(f"{s:>{W}}" for s in systems)
lines += [hdr, "-" * len(hdr)]
for n in slow_ns:
    cells = []
    for s in systems:
        c = med(s, n, "rps")
        if c is None:
            cells.append("(failed)".rjust(W))
            continue
        e = sum(r["errors"] if r["errors"] >= 0 else 1 for r in results if r["system"] == s and r["slow"] == n)
        mem = ""
        if s != "linux":
            f_, h_, ns_, nq_ = (med(s, n, "memory", k) for k in ("fs_pool", "httpd_pool", "net_socket",
                                                                  "net_send_queued"))
            if f_:
                mem = (f" {f_['median'] // 1024:.0f}/{h_['median'] // 1024:.0f}/"
                       f"{ns_['median'] // 1024:.0f}+{nq_['median'] // 1024:.0f}")
        cells.append(f"{c['median']:6.0f} ±{c['spread']:.0f}%{mem}{' E' + str(e) if e else ''}".rjust(W))
    lines.append(f"{n:>4} | " + " | ".join(cells))
lines.append("")
lines.append("throughput relative to N=0 (paper Figure 7: Flash-Lite flat; Flash loses up to 30%, Apache up to 42%;"
             " Flash-Lite/Flash ~1.8 at N>=16, Flash-Lite/Apache ~2.5 at N>=32):")
for s in systems:
    base = med(s, slow_ns[0], "rps")
    rel = []
    for n in slow_ns:
        c = med(s, n, "rps")
        rel.append(f"N={n} {c['median'] / base['median']:.2f}" if c and base and base["median"] else f"N={n} n/a")
    lines.append(f"  {s:8}: " + ", ".join(rel))
for a, b in (("iolite", "flash"), ("iolite", "posix"), ("iolite", "linux")):
    if a in systems and b in systems:
        rel = []
        for n in slow_ns:
            x, y = med(a, n, "rps"), med(b, n, "rps")
            rel.append(f"N={n} {x['median'] / y['median']:.2f}" if x and y and y["median"] else f"N={n} n/a")
        lines.append(f"  {a}/{b}: " + ", ".join(rel))
text = "\n".join(lines)
print(text)
with open(out + ".txt", "w") as f:
    f.write(text + "\n")
with open(out + ".json", "w") as f:
    json.dump({"rounds": rounds, "seconds": seconds, "warmup": warmup, "clients": clients, "rate": rate,
               "dataset": {k: v for k, v in ds.items() if k != "largest"}, "slow_documents": LARGE,
               "systems": systems, "results": results}, f, indent=1)

plt = B.pyplot()
if plt:
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    for s in systems:
        cs = [med(s, n, "rps") for n in slow_ns]
        axes[0].errorbar(slow_ns, [c["median"] if c else float("nan") for c in cs],
                         yerr=[[c["median"] - c["min"] if c else 0 for c in cs],
                               [c["max"] - c["median"] if c else 0 for c in cs]], fmt="-o", capsize=3, label=s)
        if s != "linux":
            tot = []
            for n in slow_ns:
                parts = [med(s, n, "memory", k) for k in ("fs_pool", "httpd_pool", "net_socket", "net_send_queued")]
                tot.append(sum(p["median"] for p in parts) / 2**20 if all(parts) else float("nan"))
            axes[1].plot(slow_ns, tot, "-o", label=f"{s}: fs+httpd+netstack")
    axes[0].set_ylabel("fast clients' requests/s")
    axes[1].set_ylabel("memory held (MiB)")
    for ax in axes:
        ax.set_xlabel("slow background clients")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"slow clients (2 KiB receive buffer, {rate} B/s), QEMU TCG, TAP, {B.disk_note()};"
                 f" median of {rounds}")
    fig.tight_layout()
    fig.savefig(out + ".png", dpi=110)
    print(f"plot: {out}.png")
