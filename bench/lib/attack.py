"""bench/attack, inside the namespace: see that script.

usage: attack.py OUT ROUNDS SECONDS HOLD_SECONDS "CASES" SYSTEMS...
"""
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "lib"))
import attacks as A  # noqa: E402
import iolitebench as B  # noqa: E402

out, rounds, seconds, hold = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
cases, systems = sys.argv[5].split(), sys.argv[6:]
ours = [s for s in systems if s != "linux"]
manifest_path = os.path.join(B.build_dir(ours[0] if ours else "iolite"), "images", "site.manifest")
manifest = B.load_manifest(manifest_path)
SHA = manifest[A.NORMAL_PATH][1]
B.tap_up()


def healthy(base):
    try:
        B.check_bytes(base, A.NORMAL_PATH, *manifest[A.NORMAL_PATH], timeout=10)
        return True
    except (OSError, AssertionError):
        return False


results = []
for rnd in range(1, rounds + 1):
    for system in systems:
        g = None
        try:
            for case in cases:
                if g is not None and not healthy(g.base):
                    print(f"  {system}: not answering after the last case: booted again", flush=True)
                    B.stop(g)
                    g = None
                if g is None:
                    g = B.boot(system, simulate_from=ours[0] if ours else "iolite")
                print(f"==> round {rnd}/{rounds}: {system}: {case}", flush=True)
                secs = hold if case == "half_open" else seconds
                r = A.measure(case, secs, SHA, manifest_path, ours=system != "linux")
                r.update(round=rnd, system=system)
                results.append(r)
                back = r.get("back_seconds")
                print(f"  rate before {r['before']:.1f}/s, during {r['during']:.1f} ({r['during_fraction']:.2f}),"
                      f" after {r['after']:.1f} ({r['after_fraction']:.2f}); errors {r['error_counts']},"
                      f" bad bodies {len(r['bad_bodies'])}"
                      + ("" if system == "linux" else
                         f"; memory back {'after %.0f s' % back if back is not None else 'NO: %s' % r['not_back']}")
                      + f"\n  attack: {json.dumps(r['attack'])[:400]}", flush=True)
                if system != "linux" and r.get("not_back"):
                    B.stop(g)
                    g = None
        finally:
            if g is not None:
                B.stop(g)


def med(system, case, key):
    vs = [r[key] for r in results if r["system"] == system and r["case"] == case]
    return statistics.median(vs) if vs else None


def fmt(v, spec):
    return format(v, spec) if v is not None else "-"


lines = [f"bench/attack: one keep-alive client of {A.NORMAL_PATH} (a new connection every"
         f" {A.REQUESTS_PER_CONNECTION} requests, every body's SHA-256 checked) alone for 5 s, during an attack"
         f" ({seconds:.0f} s; half_open {hold:.0f} s) and for 5 s after it; TAP in a network namespace;"
         f" {rounds} round(s), medians; systems: {' '.join(systems)}",
         "rate: good responses/s; during and after as fractions of the rate before; ours/linux: our fraction"
         " during over Linux + nginx's", ""]
W = 8
hdr = f"{'case':18}"
for s in systems:
    hdr += f" | {s + ' alone':>{W + 4}} {'during':>{W}} {'after':>{W}}"
if "linux" in systems and ours:
    hdr += f" | {'ours/linux':>10}"
lines += [hdr, "-" * len(hdr)]
for case in cases:
    row = f"{case:18}"
    for s in systems:
        row += (f" | {fmt(med(s, case, 'before'), '.1f'):>{W + 4}} {fmt(med(s, case, 'during_fraction'), '.2f'):>{W}}"
                f" {fmt(med(s, case, 'after_fraction'), '.2f'):>{W}}")
    if "linux" in systems and ours:
        o, lx = med(ours[0], case, "during_fraction"), med("linux", case, "during_fraction")
        row += f" | {fmt(o / lx if o is not None and lx else None, '.2f'):>10}"
    lines.append(row)
lines.append("")
lines.append("per round: during/after fractions; failed requests of the normal client before/during/after;"
             " memory back (s after the normal client stopped, ours)")
for case in cases:
    for s in systems:
        rs = [r for r in results if r["system"] == s and r["case"] == case]
        cells = []
        for r in rs:
            e = r["error_counts"]
            mem = "" if s == "linux" else (f", mem {r['back_seconds']}s" if r.get("back_seconds") is not None
                                           else f", mem NOT back: {r.get('not_back')}")
            cells.append(f"{r['during_fraction']:.2f}/{r['after_fraction']:.2f} err {e['before']}/{e['during']}/"
                         f"{e['after']}{', BAD BODIES' if r['bad_bodies'] else ''}{mem}")
        lines.append(f"  {case:18} {s:8}: " + "; ".join(cells))
lines.append("")
lines.append("what each attack did and saw (last round)")
for case in cases:
    for s in systems:
        rs = [r for r in results if r["system"] == s and r["case"] == case]
        if rs:
            a = {k: v for k, v in rs[-1]["attack"].items() if k != "wire"}
            lines.append(f"  {case:18} {s:8}: {json.dumps(a)[:300]}")
B.write_report(out, lines, {"rounds": rounds, "seconds": seconds, "hold": hold, "cases": cases, "systems": systems,
                            "results": results})
