"""bench/cluster's measurement: 1, 2 and 3 appliances behind haproxy and one
straight, h2load against each (bench/cluster says what and why).

usage: scaleout.py IMAGE SECONDS CLIENTS SIZES ROUNDS OUT
"""
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "cluster"))
import cluster as C  # noqa: E402  (the network and haproxy: shared with tests/robot/cluster.robot)
import iolitebench as B  # noqa: E402  (h2load, CPU time of a process session)

APPLIANCES = 3
SIZES = {"1k": (1024, "/file-1k.txt"), "16k": (16384, "/file-16k.bin"), "64k": (65536, "/file-64k.bin"),
         "256k": (262144, "/file-256k.bin"), "1m": (1048576, "/file-1m.bin")}


def host_busy():
    """(busy, total) jiffies of all the host's CPUs, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v) - idle, sum(v)


def boot_all(cluster, image):
    """Boots every appliance on its TAP; returns their processes once each
    answers / at its leased address."""
    simulate, disk = os.path.join(image, "simulate"), os.path.join(image, "images", "site.img")
    procs = []
    for n in range(1, APPLIANCES + 1):
        log = open(os.path.join(cluster.workdir, f"app{n}.serial"), "w")
        procs.append(subprocess.Popen([simulate, "--tap", C.tap(n), "--mac", C.mac(n), "--disk", disk],
                                      stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                      start_new_session=True))
    for n in range(1, APPLIANCES + 1):
        deadline = time.time() + 300
        while True:
            try:
                if B.get(f"http://{C.address(n)}", "/", 3)[0] == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline or procs[n - 1].poll() is not None:
                raise SystemExit(f"appliance {n} did not serve / (serial log {cluster.workdir}/app{n}.serial)")
            time.sleep(1)
    return procs


def measure(base, path, size, clients, seconds, procs, haproxy):
    """One h2load run, with the CPU (cores) each QEMU, haproxy and the host used."""
    cpu0 = [B.guest_cpu_seconds(p) for p in procs]
    hp0 = B.guest_cpu_seconds(haproxy) if haproxy else 0.0
    busy0, total0 = host_busy()
    # h2load: a child that has been waited for when h2load() returns.
    kids0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    r = B.h2load(base, path, clients, seconds)
    wall = time.monotonic() - t0
    kids1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy1, total1 = host_busy()
    r["h2load_cores"] = round((kids1.ru_utime + kids1.ru_stime - kids0.ru_utime - kids0.ru_stime) / wall, 2)
    r["qemu_cores"] = [round((B.guest_cpu_seconds(p) - c) / wall, 2) for p, c in zip(procs, cpu0)]
    r["haproxy_cores"] = round((B.guest_cpu_seconds(haproxy) - hp0) / wall, 2) if haproxy else 0.0
    r["host_cores"] = round(os.cpu_count() * (busy1 - busy0) / max(1, total1 - total0), 2)
    r["mbs"] = r["rps"] * size / 1e6
    return r


def main():
    image, seconds, clients, sizes, rounds, out = sys.argv[1:7]
    seconds, clients, rounds, sizes = int(seconds), int(clients), int(rounds), sizes.split()
    manifest = B.load_manifest(os.path.join(image, "images", "site.manifest"))
    cluster = C.Cluster(APPLIANCES)
    procs = []
    results = []
    try:
        cluster.create()
        # This thread and what it starts (QEMU, h2load) from now on run in
        # the namespace; haproxy and dnsmasq are started into it by name.
        C.setns(cluster.name)
        cluster.start_dhcp()
        print(f"==> booting {APPLIANCES} appliances ({image}) in namespace {cluster.name}", flush=True)
        procs = boot_all(cluster, image)
        configs = [("direct", 1)] + [(f"haproxy x{n}", n) for n in range(1, APPLIANCES + 1)]
        for rnd in range(1, rounds + 1):
            for name, n in configs:
                haproxy = None
                if name == "direct":
                    cluster.stop_haproxy()
                    base = f"http://{C.address(1)}"
                else:
                    cluster.start_haproxy(range(1, n + 1))
                    for k in range(1, n + 1):
                        cluster.wait_for_status(C.server_name(k), "UP", timeout=60)
                    haproxy, base = cluster.haproxy, f"http://{C.HOST_SIDE}:{C.FRONTEND_PORT}"
                for s in sizes:
                    size, path = SIZES[s]
                    # Once byte for byte first (h2load counts statuses only).
                    B.check_bytes(base, path, size, manifest[path][1])
                    r = measure(base, path, size, clients, seconds, procs, haproxy)
                    r.update(round=rnd, config=name, appliances=n, size=s)
                    results.append(r)
                    print(f"  round {rnd} {name:11} {s:>4}: {r['rps']:8.1f} req/s {r['mbs']:6.2f} MB/s "
                          f"errors {r['errors']}; cores: qemu {r['qemu_cores']} haproxy {r['haproxy_cores']} "
                          f"h2load {r['h2load_cores']} host {r['host_cores']}", flush=True)
    finally:
        for p in procs:
            B.stop(p)
        cluster.delete()
    report(results, sizes, seconds, clients, rounds, out)


def report(results, sizes, seconds, clients, rounds, out):
    """The scaling table: median req/s per configuration and size, the
    ratio to haproxy with one appliance, the cores used."""
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    lines = [f"bench/cluster: h2load --h1 -c {clients}, {seconds} s per case after a 2 s warm-up, keep-alive,",
             "through haproxy 2.6 (round robin, tools/cluster/cluster.py) on a bridge in a network namespace;",
             f"appliances under QEMU TCG, one vCPU each; host: {os.cpu_count()} cores, load average at the end {load};",
             f"{rounds} round(s), medians. scaling: req/s over haproxy x1's. cores: CPU time per second of the",
             "serving appliances' QEMUs, haproxy, h2load and the whole host (every process, other users' too);",
             "req/core: req/s per core the serving appliances got.",
             ""]
    head = f"{'configuration':13} {'size':>5} {'req/s':>8} {'MB/s':>6} {'scaling':>7} {'errors':>6}  " \
           f"{'qemu cores':>16} {'req/core':>8} {'haproxy':>7} {'h2load':>6} {'host':>5}"
    lines += [head, "-" * len(head)]
    configs = []
    for r in results:
        if r["config"] not in configs:
            configs.append(r["config"])
    for s in sizes:
        rows = {c: [r for r in results if r["config"] == c and r["size"] == s] for c in configs}
        med = {c: statistics.median(r["rps"] for r in rs) for c, rs in rows.items() if rs}
        base = med.get("haproxy x1") or 0
        for c in configs:
            rs = rows[c]
            if not rs:
                continue
            last = rs[-1]
            serving = last["qemu_cores"][:max(1, last["appliances"])]
            used = "+".join(f"{x:.2f}" for x in serving)
            per_core = f"{med[c] / sum(serving):.0f}" if sum(serving) else "-"
            errors = sum(r["errors"] if r["errors"] >= 0 else 1 for r in rs)
            scale = f"{med[c] / base:.2f}x" if base else "-"
            mbs = statistics.median(r["mbs"] for r in rs)
            lines.append(f"{c:13} {s:>5} {med[c]:8.1f} {mbs:6.2f} {scale:>7} {errors:6d}  {used:>16} {per_core:>8} "
                         f"{last['haproxy_cores']:7.2f} {last['h2load_cores']:6.2f} {last['host_cores']:5.2f}")
        lines.append("")
    B.write_report(os.path.join(out, "cluster"), lines, {"results": results})


if __name__ == "__main__":
    main()
