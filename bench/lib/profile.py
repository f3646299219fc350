"""bench/profile's driver: where the host's CPU goes while a guest serves
one h2load case, from `perf record` of its QEMU, and (our systems) what
each request costs in component activations.

usage: profile.py OUT SECONDS CLIENTS PATH SYSTEM...

Runs inside bench/profile's network namespace. Per system: boot, warm
(one request, then 2 s of the case), then `perf record -F 2000` of the
QEMU process during SECONDS of h2load, and the guest's counters before and
after. The samples are put into categories:

- guest code: the translated blocks TCG runs (perf's `[JIT]` mappings);
- TB lookup: finding the next translated block when the jump cache
  cannot (qht hash lookups, cpu-exec.c's loop);
- softmmu TLB: flushing QEMU's software TLB and jump cache on every CR3
  write, refilling it entry by entry, and the x86 page walks that refill
  needs (cputlb.c, target/i386's mmu_translate);
- host kernel: the host's own work for QEMU (TAP reads and writes, thread
  wake-ups, polling);
- other: the rest of QEMU (device emulation, timers, the main loop).

Debian's QEMU is stripped of its static functions: a sample in one is
labelled with the nearest exported symbol before it (`~name`), and the
category map below names the exported neighbours of the static functions
of each category in the build of QEMU 7.2 that bookworm ships (checked
against its symbol table; a sample whose label is in no map is "other").
"""
import bisect
import collections
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import iolitebench as B  # noqa: E402

out, seconds, clients, path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
systems = sys.argv[5:]

TB_LOOKUP = re.compile(r"^~?(qht_|tb_lookup|tb_htable|tb_jmp_cache|cpu_exec|cpu_loop_exit|curr_cflags|"
                       r"helper_lookup_tb_ptr|cpu_tb_exec|cpu_handle_)")
SOFTMMU = re.compile(r"^~?(tlb_|tcg_flush_jmp_cache|probe_access|get_page_addr_code|helper_(le|be)_(ld|st)|"
                     r"helper_(ld|st)[bwlq]|plugin_gen_tb_end|address_space_translate_for_iotlb|qemu_ram_|"
                     r"memory_region_get_ram_ptr|x86_cpu_tlb_fill|do_smm_enter|get_pg_mode|cpu_x86_update_cr3|"
                     r"get_ptr_rcu_reader|find_next_bit)")
CATEGORIES = ["guest code", "TB lookup", "softmmu TLB", "host kernel", "other"]


def qemu_symbols(binary):
    """The exported symbols of QEMU, sorted by address (for stripped code)."""
    nm = subprocess.run(["nm", "-D", "--defined-only", binary], capture_output=True, text=True).stdout
    syms = sorted((int(a, 16), n) for a, _, n in (line.split()[:3] for line in nm.splitlines() if len(line.split()) >= 3))
    return [a for a, _ in syms], [n for _, n in syms]


def samples(data, binary):
    """(label, category, share in %) per distinct location of perf.data
    `data` (perf report's flat profile)."""
    addrs, names = qemu_symbols(binary)
    text = subprocess.run(["perf", "report", "-i", data, "--no-children", "-F", "overhead,dso,sym", "--stdio",
                           "-g", "none", "--percent-limit", "0"], capture_output=True, text=True,
                          errors="replace").stdout
    for line in text.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(.*?)\s+\[([.k])\]\s+(.*?)\s*$", line)
        if not m:
            continue
        share, dso, sym = float(m.group(1)), m.group(2), m.group(4)
        if "[JIT]" in dso:
            yield "(translated code)", "guest code", share
        elif "kernel" in dso or m.group(3) == "k":
            yield sym, "host kernel", share
        else:
            if sym.startswith("0x") and "qemu-system" in dso:
                i = bisect.bisect_right(addrs, int(sym, 16)) - 1
                sym = "~" + names[i] if i >= 0 else sym
            if TB_LOOKUP.match(sym):
                yield sym, "TB lookup", share
            elif SOFTMMU.match(sym):
                yield sym, "softmmu TLB", share
            else:
                yield sym, "other", share


# Per request, what our components did: counters (component, name).
ACTIVITY = [("netdrv", "drv_irqs"), ("netdrv", "drv_wakeups_sent"), ("netdrv", "drv_rx_frames"),
            ("netdrv", "drv_tx_frames"), ("netdrv", "drv_rx_tail_writes"), ("netstack", "tcp_wakeups"), ("netstack", "tcp_polls"),
            ("httpd", "wakeups"), ("fs", "cache_hits"), ("fs", "cache_misses"),
            ("netstack", "tcp_busy_cycles"), ("netdrv", "drv_busy_cycles")]

B.tap_up()
binary = subprocess.run(["sh", "-c", "readlink -f $(command -v qemu-system-x86_64)"], capture_output=True,
                        text=True).stdout.strip()
results = []
for system in systems:
    print(f"==> {system}", flush=True)
    g = B.boot(system, net="tap", simulate_from=next(s for s in systems if s != "linux"))
    try:
        B.get(g.base, path, 30)
        B.h2load(g.base, path, clients, 2, "tap")
        before = B.stats(g.base) if system != "linux" else None
        data = os.path.join(os.path.dirname(out) or ".", f"perf-{system}.data")
        perf = subprocess.Popen(["perf", "record", "-q", "-F", "2000", "-p", str(B.qemu_pid(g)), "-o", data,
                                 "--", "sleep", str(seconds)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        cpu0, t0 = B.guest_cpu_seconds(g), time.monotonic()
        r = B.h2load(g.base, path, clients, seconds, "tap")
        cpu = (B.guest_cpu_seconds(g) - cpu0) / (time.monotonic() - t0)
        perf.wait()
        after = B.stats(g.base) if system != "linux" else None
    finally:
        B.stop(g)
    cats, labels = collections.Counter(), collections.Counter()
    for label, cat, share in samples(data, binary):
        cats[cat] += share
        labels[label] += share
    n = sum(cats.values()) or 1
    res = {"system": system, "rps": r["rps"], "errors": r["errors"], "cpu": cpu,
           "categories": {c: cats[c] / n for c in CATEGORIES},
           "top": [(label, k / n) for label, k in labels.most_common(15)]}
    if before and after and r["rps"]:
        done = after["httpd"].get("requests", 0) - before["httpd"].get("requests", 0)
        res["per_request"] = {f"{c}.{k}": (after.get(c, {}).get(k, 0) - before.get(c, {}).get(k, 0)) / max(done, 1)
                              for c, k in ACTIVITY}
    results.append(res)

lines = [f"profile: h2load, {clients} keep-alive client(s), {path}, {seconds} s, TAP; perf record -F 2000 of the"
         f" guest's QEMU ({binary}); share of the host CPU samples per category", ""]
W = 14
hdr = f"{'':22} | " + " | ".join(f"{r['system']:>{W}}" for r in results)
lines += [hdr, "-" * len(hdr)]
lines.append(f"{'req/s':22} | " + " | ".join(f"{r['rps']:>{W}.0f}" for r in results))
lines.append(f"{'CPU (cores busy)':22} | " + " | ".join(f"{r['cpu']:>{W}.2f}" for r in results))
lines.append(f"{'CPU us per request':22} | " + " | ".join(
    f"{(r['cpu'] * 1e6 / r['rps'] if r['rps'] else float('nan')):>{W}.0f}" for r in results))
for c in CATEGORIES:
    lines.append(f"{c:22} | " + " | ".join(f"{r['categories'][c] * 100:>{W - 1}.1f}%" for r in results))
ours = [r for r in results if "per_request" in r]
if ours:
    lines += ["", "per request (our systems' counters; busy cycles are TSC cycles, host time under TCG)"]
    for c, k in ACTIVITY:
        key = f"{c}.{k}"
        lines.append(f"  {key:26} " + "  ".join(f"{r['system']} {r['per_request'][key]:,.2f}" for r in ours))
for r in results:
    lines += ["", f"{r['system']}: top labels (~name: a static function after the exported symbol name)"]
    for label, k in r["top"]:
        lines.append(f"  {k * 100:5.1f}%  {label}")
B.write_report(out, lines, {"clients": clients, "path": path, "seconds": seconds, "results": results})
