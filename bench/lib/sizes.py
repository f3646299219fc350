"""bench/sizes and bench/cgi, inside the namespace: see those scripts.

usage: sizes.py OUT ROUNDS SECONDS CLIENTS PERSISTENT KINDS SIZES SYSTEMS...
  KINDS: "static", "cgi" or "static cgi"; SIZES: names of sitegen.SIZES
       sizes.py --redraw OUT
  the table (OUT.txt) and the plot (OUT.png) again from a run's OUT.json,
  measuring nothing
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import iolitebench as B  # noqa: E402
import sitegen  # noqa: E402

redraw = sys.argv[1] == "--redraw"
if redraw:
    out = sys.argv[2]
    with open(out + ".json") as f:
        saved = json.load(f)
    rounds, seconds, clients = saved["rounds"], saved["seconds"], saved["clients"]
    persistent, systems = saved["persistent"], saved["systems"]
    results, counters = saved["results"], saved["counters"]
    kinds = list(dict.fromkeys(r["kind"] for r in results))
    want = {r["size"] for r in results}
else:
    out, rounds, seconds, clients = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    persistent = sys.argv[5] == "1"
    kinds, want, systems = sys.argv[6].split(), sys.argv[7].split(), sys.argv[8:]
SIZES = [s for s in sitegen.SIZES if s[0] in want]
SITE = os.path.join(B.ROOT, "build", "bench-sites", "sizes")
ours = [s for s in systems if s != "linux"]
conn = "keep-alive" if persistent else "one request per connection (Connection: close)"


def url(kind, size):
    name = next(n for n, b in sitegen.SIZES if b == size)
    return sitegen.size_path(name) if kind == "static" else f"/cgi-bin/blob?size={size}"


def check(base, kind, size):
    if kind == "static":
        n, sha = manifest[url(kind, size)]
        B.check_bytes(base, url(kind, size), n, sha)
    else:
        body = B.check_bytes(base, url(kind, size), size)
        assert body == B.blob_bytes(size), f"/cgi-bin/blob?size={size}: wrong bytes"


def measure():
    """Every case of every round: (results, counters)."""
    results, counters = [], {}
    B.tap_up()
    for rnd in range(1, rounds + 1):
        for system in systems:
            print(f"==> round {rnd}/{rounds}: {system}", flush=True)
            g = B.boot(system, disk=os.path.join(SITE, "site.img"), simulate_from=ours[0] if ours else "iolite",
                       linux=os.path.join(B.ROOT, "build", "bench-linux-sizes"))
            try:
                before = B.stats(g.base, retry_s=30) if system != "linux" else None
                for kind in kinds:
                    if kind == "cgi" and system == "linux":
                        continue
                    for name, size in SIZES:
                        t0 = B.time.time()
                        try:
                            # Waits out the previous case's closing connections
                            # (the check retries), then checks the bytes.
                            for attempt in range(30):
                                try:
                                    check(g.base, kind, size)
                                    break
                                except OSError:
                                    if attempt == 29:
                                        raise
                                    B.time.sleep(1)
                        except (OSError, AssertionError) as e:
                            print(f"  {system} {kind} {name}: {e!r}; case skipped", flush=True)
                            results.append({"round": rnd, "system": system, "kind": kind, "size": name, "bytes": size,
                                            "rps": None, "mbs": None, "errors": -1})
                            continue
                        r = B.wrk(g.base, clients, seconds, path=url(kind, size), close=not persistent)
                        r.pop("output", None)
                        r.update(round=rnd, system=system, kind=kind, size=name, bytes=size,
                                 mbs=r["rps"] * size / 1e6)
                        results.append(r)
                        print(f"  {system:8} {kind:6} {name:>5}: {r['rps']:8.1f} req/s {r['mbs'] * 8:8.2f} Mb/s"
                              f" errors {r['errors']} ({B.time.time() - t0:.0f} s with the check)", flush=True)
                if before is not None:
                    after = B.stats(g.base, retry_s=30)
                    n0, n1 = before.get("netstack", {}), after.get("netstack", {})
                    counters.setdefault(system, []).append({
                        "connections_accepted": n1.get("tcp_connections_accepted", 0) - n0.get("tcp_connections_accepted", 0),
                        "bytes_copied": sum(after.get(c, {}).get("bytes_copied", 0) - before.get(c, {}).get("bytes_copied", 0)
                                            for c in ("httpd", "netstack", "netdrv", "fs", "cgi")),
                        "checksum_hit_rate_percent": n1.get("tcp_csum_hit_rate_percent"),
                    })
            finally:
                B.stop(g)
    return results, counters


if not redraw:
    manifest = B.load_manifest(os.path.join(SITE, "site.manifest"))
    results, counters = measure()


def med(system, kind, name, key):
    return B.cell([r[key] for r in results if (r["system"], r["kind"], r["size"]) == (system, kind, name)
                   and r[key] is not None])


def errs(system, kind, name):
    return sum(r["errors"] if r["errors"] >= 0 else 1
               for r in results if (r["system"], r["kind"], r["size"]) == (system, kind, name))


lines = [f"{os.path.basename(out)}: wrk, {clients} clients, {conn}, {seconds} s per case, TAP;"
         f" {rounds} round(s), systems interleaved; median Mb/s of response bodies (req/s), ±spread",
         ""]
# The paper's Figure 3 (non-persistent) / 4 (persistent): Flash-Lite vs
# Flash vs Apache. Our iolite ~ Flash-Lite, flash ~ Flash, posix ~ a
# read/write server, linux = Linux 6.1 + nginx (the conventional reference).
ratio_cols = []
if "iolite" in systems and "flash" in systems:
    ratio_cols.append(("iolite", "flash", "paper Flash-Lite/Flash: ~1.0 at <=5 KB, up to 1.43 at >=20 KB"))
if "iolite" in systems and "posix" in systems:
    ratio_cols.append(("iolite", "posix", "(no paper counterpart: a read/write server)"))
if "iolite" in systems and "linux" in systems and "static" in kinds:
    ratio_cols.append(("iolite", "linux", "paper Flash-Lite/Apache: up to 2.37"))
W = 26
hdr = f"{'size':>5} {'kind':6} | " + " | ".join(f"{s:>{W}}" for s in systems) + "".join(
    f" | {a}/{b:<6}" for a, b, _ in ratio_cols)
lines += [hdr, "-" * len(hdr)]
summary = {}
for kind in kinds:
    for name, size in SIZES:
        cells = []
        for s in systems:
            c = med(s, kind, name, "mbs")
            rq = med(s, kind, name, "rps")
            summary.setdefault(s, {}).setdefault(kind, {})[name] = {"mbs": c, "rps": rq}
            if c is None:
                cells.append(("n/a" if s == "linux" and kind == "cgi" else "(failed)").rjust(W))
                continue
            e = errs(s, kind, name)
            cells.append(f"{c['median'] * 8:7.2f} ({rq['median']:6.0f}) ±{c['spread']:.0f}%{' E' + str(e) if e else ''}"
                         .rjust(W))
        ratios = []
        for a, b, _ in ratio_cols:
            x, y = summary[a][kind][name]["rps"], (summary.get(b, {}).get(kind if b != "linux" else "static", {})
                                                   .get(name, {}).get("rps"))
            ratios.append(f"{x['median'] / y['median']:>{len(a) + 7}.2f}" if x and y and y["median"] else
                          " " * (len(a) + 3) + "n/a")
        lines.append(f"{name:>5} {kind:6} | " + " | ".join(cells) + "".join(f" | {r}" for r in ratios))
lines.append("")
for a, b, paper in ratio_cols:
    lines.append(f"{a}/{b}: ratio of req/s; {paper}")
if "cgi" in kinds and "static" in kinds:
    lines.append("cgi/static of req/s: paper Figure 5 (non-persistent) Flash-Lite ~0.87, Flash and Apache ~0.5;"
                 " Figure 6 (persistent): only Flash-Lite gains from persistence")
    for s in ours:
        rs = []
        for name, _ in SIZES:
            c, st = summary[s]["cgi"][name]["rps"], summary[s]["static"][name]["rps"]
            rs.append(f"{name} {c['median'] / st['median']:.2f}" if c and st and st["median"] else f"{name} n/a")
        lines.append(f"  {s:7} cgi/static: " + ", ".join(rs))
for s in ours:
    for i, c in enumerate(counters.get(s, []), 1):
        lines.append(f"{s} (round {i}): " + ", ".join(f"{k} {v}" for k, v in c.items()))
text = "\n".join(lines)
print(text)
os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
with open(out + ".txt", "w") as f:
    f.write(text + "\n")
with open(out + ".json", "w") as f:
    json.dump({"rounds": rounds, "seconds": seconds, "clients": clients, "persistent": persistent,
               "systems": systems, "results": results, "counters": counters}, f, indent=1)

plt = B.pyplot()
if plt:
    fig, axes = plt.subplots(1, len(kinds), figsize=(7 * len(kinds), 5), squeeze=False)
    xs = [b / 1024 for _, b in SIZES]
    for ax, kind in zip(axes[0], kinds):
        for s in systems:
            if s == "linux" and kind == "cgi":
                continue
            cs = [summary[s][kind][n]["mbs"] for n, _ in SIZES]
            ys = [c["median"] * 8 if c else float("nan") for c in cs]
            lo = [(c["median"] - c["min"]) * 8 if c else 0 for c in cs]
            hi = [(c["max"] - c["median"]) * 8 if c else 0 for c in cs]
            ax.errorbar(xs, ys, yerr=[lo, hi], fmt="-o", capsize=3, label=s, color=f"C{systems.index(s)}")
        if kind == "cgi" and "static" in kinds:
            for s in ours:
                ys = [summary[s]["static"][n]["mbs"] for n, _ in SIZES]
                ax.plot(xs, [c["median"] * 8 if c else float("nan") for c in ys], ":", label=f"{s} static",
                        color=f"C{systems.index(s)}")
        ax.set_xlabel("document size (KiB)")
        ax.set_ylabel("output bandwidth (Mb/s)")
        ax.set_title(f"{kind}, {clients} clients, {'persistent' if persistent else 'non-persistent'}")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"{os.path.basename(out)}: Iolite OS copy modes" + (" vs Linux 6.1 + nginx" if "linux" in systems
                 else "") + f"\nQEMU TCG, e1000, TAP; median of {rounds}, bars min-max", fontsize=11)
    fig.tight_layout()
    fig.savefig(out + ".png", dpi=110)
    print(f"plot: {out}.png")
