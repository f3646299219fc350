"""bench/trace, inside the namespace: see that script.

usage: trace.py OUT ROUNDS SECONDS WARMUP CLIENTS PERSISTENT DATASETS SYSTEMS...
  DATASETS: indexes into trace.json's data sets ("0 1 2 ...")
  SYSTEMS: image names (iolite, flash, posix, iolite-gds, ...) and linux
"""
import json
import os
import random
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import iolitebench as B  # noqa: E402

out, rounds, seconds, warmup, clients = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
persistent = sys.argv[6] == "1"
want, systems = [int(x) for x in sys.argv[7].split()], sys.argv[8:]
SITE = os.path.join(B.ROOT, "build", "bench-sites", "trace")
with open(os.path.join(SITE, "trace.json")) as f:
    trace = json.load(f)
DATASETS = [trace["datasets"][i] for i in want]
manifest = B.load_manifest(os.path.join(SITE, "site.manifest"))
ours = [s for s in systems if s != "linux"]
B.tap_up()


def check_sample(base, ds, rng, n=6):
    """The data set's largest file and n random ones, byte for byte."""
    paths = [ds["largest"][0]] + [trace["files"][trace["order"][rng.randrange(ds["files"])]]["path"] for _ in range(n)]
    for p in paths:
        size, sha = manifest[p]
        B.check_bytes(base, p, size, sha)


results = []
budget = {}
for rnd in range(1, rounds + 1):
    for system in systems:
        print(f"==> round {rnd}/{rounds}: {system}", flush=True)
        g = B.boot(system, disk=os.path.join(SITE, "site.img"), simulate_from=ours[0] if ours else "iolite",
                   linux=os.path.join(B.ROOT, "build", "bench-linux-trace"))
        rng = random.Random(rnd)
        try:
            if system != "linux":
                m = re.search(r"cache budget (\d+) KiB", g.serial())
                p = re.search(r"\[fs\] cache policy (\w+)", g.serial())
                budget[system] = {"budget": int(m.group(1)) * 1024 if m else None, "policy": p.group(1) if p else "?"}
            # Data sets grow (each is a prefix of the next): the cache
            # carries over, and the warm-up replays the new one first.
            for i, ds in zip(want, DATASETS):
                log = os.path.join(SITE, ds["log"])
                r = {"round": rnd, "system": system, "dataset": i, "files": ds["files"], "bytes": ds["bytes"]}
                try:
                    check_sample(g.base, ds, rng)
                    if warmup:
                        B.wrk(g.base, clients, warmup, log=log, close=not persistent, start=0)
                    before = B.stats(g.base, retry_s=30) if system != "linux" else None
                    w = B.wrk(g.base, clients, seconds, log=log, close=not persistent, start=50000 * rnd,
                              during=(lambda: B.stats(g.base)) if system != "linux" else None)
                    after = B.stats(g.base, retry_s=30) if system != "linux" else None
                    check_sample(g.base, ds, rng)
                except (OSError, AssertionError, ValueError) as e:
                    print(f"  {system} data set {ds['files']} files: {e!r}; skipped", flush=True)
                    r.update(rps=None, errors=-1)
                    results.append(r)
                    continue
                r.update(rps=w["rps"], mbs=w["bps"] / 1e6, errors=w["errors"], requests=w["requests"])
                if before is not None:
                    d = B.fs_delta(before, after)
                    r.update(hit_rate=d["hit_rate"], disk_reads=d["disk_reads"], disk_mb=d["disk_bytes"] / 1e6,
                             disk_reads_per_req=d["disk_reads"] / w["requests"] if w["requests"] else None,
                             evictions=d["evictions"], evictions_referenced=d["evictions_referenced"])
                    mid = w.get("during")
                    if isinstance(mid, dict) and "fs" in mid:
                        r["memory"] = B.memory(mid)
                results.append(r)
                hr = f" hit {r['hit_rate'] * 100:5.1f}% disk reads {r['disk_reads']}" if "hit_rate" in r else ""
                print(f"  {system:10} {ds['files']:5} files {ds['bytes'] / 1e6:5.1f} MB: {w['rps']:7.1f} req/s"
                      f" {w['bps'] / 1e6:6.2f} MB/s errors {w['errors']}{hr}", flush=True)
        finally:
            B.stop(g)


def med(system, i, key):
    return B.cell([r.get(key) for r in results if r["system"] == system and r["dataset"] == i])


cache = next((b["budget"] for b in budget.values() if b["budget"]), None)
conn = "keep-alive" if persistent else "one request per connection"
lines = [f"{os.path.basename(out)}: request logs replayed by wrk (bench/lib/replay.lua), {clients} clients, {conn},"
         f" warm-up {warmup} s, {seconds} s measured, TAP, {B.disk_note()}; {rounds} round(s); medians,"
         " ±spread of req/s",
         f"site: {len(trace['files'])} files, mean {trace['mean_file'] / 1e3:.1f} KB, Zipf {trace['params']['zipf']};"
         f" file cache budget {cache // 1024 if cache else '?'} KiB;"
         " policies: " + ", ".join(f"{s} {b['policy']}" for s, b in budget.items()),
         "data sets (mean request of each log): " + ", ".join(
             f"{ds['files']} files {ds['bytes'] / 1e6:.1f} MB ({ds['mean_request'] / 1e3:.1f} KB)" for ds in DATASETS),
         ""]
W = 34
hdr = f"{'data set':>22} | " + " | ".join(f"{s:>{W}}" for s in systems)
lines += [hdr, "-" * len(hdr)]
for i, ds in zip(want, DATASETS):
    x = f"{ds['files']} f {ds['bytes'] / 1e6:.1f} MB" + (f" {ds['bytes'] / cache:.1f}xC" if cache else "")
    cells = []
    for s in systems:
        c = med(s, i, "rps")
        if c is None:
            cells.append("(failed)".rjust(W))
            continue
        e = sum(r["errors"] if r["errors"] >= 0 else 1 for r in results if r["system"] == s and r["dataset"] == i)
        h, dr = med(s, i, "hit_rate"), med(s, i, "disk_reads_per_req")
        extra = f" hit {h['median'] * 100:3.0f}% {dr['median']:.2f}rd/rq" if h and dr else ""
        cells.append(f"{c['median']:6.0f} ±{c['spread']:.0f}%{extra}{' E' + str(e) if e else ''}".rjust(W))
    lines.append(f"{x:>22} | " + " | ".join(cells))
lines.append("")
lines.append("req/s ratios per data set (paper Table 1, Rice trace, beyond the cache: Flash/Apache 1.18,"
             " Flash-Lite/Apache 1.65, Flash-Lite/Flash 1.40):")
pairs = [(a, b) for a, b in (("iolite", "flash"), ("iolite", "posix"), ("flash", "posix"), ("iolite", "linux"),
                             ("iolite-gds", "iolite"), ("iolite-gds", "flash"), ("iolite-gds", "posix"))
         if a in systems and b in systems]
for i, ds in zip(want, DATASETS):
    rs = []
    for a, b in pairs:
        x, y = med(a, i, "rps"), med(b, i, "rps")
        rs.append(f"{a}/{b} {x['median'] / y['median']:.2f}" if x and y and y["median"] else f"{a}/{b} n/a")
    lines.append(f"  {ds['files']:5} files: " + ", ".join(rs))
if "iolite-gds" in systems:
    # Flash-Lite chose its cache's policy (GDS); Flash and Apache had
    # FreeBSD's, so iolite-gds against the LRU copying modes is the
    # paper's own pairing.
    lines.append("  (the paper's pairing: Flash-Lite = IO-Lite + its own GDS policy, Flash and Apache the"
                 " kernel's LRU-like cache: iolite-gds/flash and iolite-gds/posix)")
if "iolite-gds" in systems and "iolite" in systems:
    lines.append("hit rates, LRU (iolite) vs Greedy-Dual-Size (iolite-gds), chunk lookups:")
    for i, ds in zip(want, DATASETS):
        a, b = med("iolite", i, "hit_rate"), med("iolite-gds", i, "hit_rate")
        if a and b:
            lines.append(f"  {ds['files']:5} files: lru {a['median'] * 100:5.1f}%  gds {b['median'] * 100:5.1f}%")
lines.append("memory held halfway through the measured run (median over rounds, KiB): fs pool | httpd pool |"
             " netstack sockets+queued | cgi pool | cache budget = memory budget - charged httpd, netstack, fs held")
for s in ours:
    for i, ds in zip(want, DATASETS):
        ms = [r["memory"] for r in results if r["system"] == s and r["dataset"] == i and "memory" in r]
        if not ms:
            continue
        mm = {k: B.cell([m[k] for m in ms])["median"] // 1024 for k in ms[0]}
        lines.append(f"  {s:10} {ds['files']:5} files: fs {mm['fs_pool']} (cached {mm['fs_cached']}) | httpd"
                     f" {mm['httpd_pool']} | net {mm['net_socket']}+{mm['net_send_queued']} | cgi {mm['cgi_pool']}"
                     + (f" | budget {mm['fs_budget']} (charged {mm['charged_httpd']} + {mm['charged_net']}"
                        f" + {mm['charged_fs_held']})" if mm.get("fs_budget") else ""))
text = "\n".join(lines)
print(text)
with open(out + ".txt", "w") as f:
    f.write(text + "\n")
with open(out + ".json", "w") as f:
    json.dump({"rounds": rounds, "seconds": seconds, "warmup": warmup, "clients": clients, "persistent": persistent,
               "systems": systems, "budget": budget, "datasets": [{k: v for k, v in d.items() if k != "largest"}
                                                                  for d in DATASETS], "results": results}, f, indent=1)

plt = B.pyplot()
if plt:
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    xs = [ds["bytes"] / 1e6 for ds in DATASETS]
    for s in systems:
        cs = [med(s, i, "rps") for i in want]
        axes[0].errorbar(xs, [c["median"] if c else float("nan") for c in cs],
                         yerr=[[c["median"] - c["min"] if c else 0 for c in cs],
                               [c["max"] - c["median"] if c else 0 for c in cs]], fmt="-o", capsize=3, label=s)
        hs = [med(s, i, "hit_rate") for i in want]
        if any(hs):
            axes[1].plot(xs, [h["median"] * 100 if h else float("nan") for h in hs], "-o", label=s)
    for ax, label in ((axes[0], "requests/s"), (axes[1], "file cache hit rate (%)")):
        if cache:
            ax.axvline(cache / 1e6, color="grey", ls=":", label="cache budget")
        ax.set_xscale("log")
        ax.set_xlabel("data set (MB)")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"trace replay ({conn}, {clients} clients), QEMU TCG, TAP, {B.disk_note()}; median of {rounds}")
    fig.tight_layout()
    fig.savefig(out + ".png", dpi=110)
    print(f"plot: {out}.png")
