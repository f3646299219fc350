"""bench/guestprof's driver: per system, boot with a gdbstub on a Unix
socket, warm (one request, 2 s of the case), then sample the vCPU
(bench/lib/guestpc.py) while h2load runs SECONDS, and print the shares of
the samples per component and per function.

usage: guestprof.py OUT SECONDS CLIENTS PATH SYSTEM...
"""
import os
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import guestpc  # noqa: E402
import iolitebench as B  # noqa: E402

out, seconds, clients, path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
systems = sys.argv[5:]

B.tap_up()
results = []
for system in systems:
    print(f"==> {system}", flush=True)
    sock = os.path.join(tempfile.mkdtemp(prefix="guestprof-"), "gdb.sock")
    g = B.boot(system, net="tap", qemu_extra=("-gdb", f"unix:{sock},server=on,wait=off"))
    try:
        B.get(g.base, path, 30)
        B.h2load(g.base, path, clients, 2, "tap")
        kernel, elves = guestpc.elves_of(B.build_dir(system))
        sampler = guestpc.Sampler(sock, kernel, elves)
        load = {}
        # h2load's own warm-up (2 s) runs before the sampling starts.
        t = threading.Thread(target=lambda: load.update(B.h2load(g.base, path, clients, seconds + 1, "tap")))
        t.start()
        time.sleep(2.5)
        sampler.run(seconds)
        t.join()
    finally:
        B.stop(g)
    n, comps, funcs = sampler.report(30)
    results.append({"system": system, "samples": n, "rps_while_sampled": load.get("rps", 0.0),
                    "components": comps, "functions": [[c, f, s] for (c, f), s in funcs],
                    "lines": [[c, f"0x{a:x}", s, fr] for c, a, s, fr in sampler.hot_lines(20)]})

lines = [f"guestprof: h2load, {clients} keep-alive client(s), {path}, {seconds} s sampled, TAP; vCPU stopped at"
         " random moments (mean 4 ms apart) through QEMU's gdbstub, RIP and CR3 read", ""]
for r in results:
    lines.append(f"## {r['system']}: {r['samples']} samples, {r['rps_while_sampled']:.0f} req/s while sampled")
    lines.append("  by component:")
    for c, s in r["components"]:
        lines.append(f"    {s * 100:5.1f}%  {c}")
    lines.append("  by function:")
    for c, f, s in r["functions"]:
        lines.append(f"    {s * 100:5.1f}%  {c:9} {f}")
    lines.append("  by instruction (where the vCPU stopped; source of the instruction before it, inlined frames"
                 " innermost first):")
    for c, a, s, frames in r["lines"]:
        lines.append(f"    {s * 100:5.1f}%  {c:9} {a}")
        for fr in frames[:4]:
            lines.append(f"              {fr}")
    lines.append("")
B.write_report(out, lines, {"clients": clients, "path": path, "seconds": seconds, "results": results})
