#!/usr/bin/env python3
"""Seeded web sites and request logs for the benchmarks (bench/sizes,
bench/trace, bench/slow, bench/cgi), put into ext2 images the way
tools/image/make-site-image.sh does (it is called to make the image).

usage: bench/lib/sitegen.py sizes OUT_DIR
       bench/lib/sitegen.py trace OUT_DIR [--files N] [--seed S] [--mean BYTES]
                                        [--zipf A] [--requests R]
                                        [--datasets "B1 B2 ..."]

`sizes`: the demo site (site/) plus /sizes/<n>.bin for every size of the
paper's Figure 3 (500 B .. 200 KB: 500, 1k, 2k, 3k, 5k, 7k, 10k, 15k, 20k,
50k, 100k, 200k; "k" = 1000 bytes as in the paper's KBytes is ambiguous,
so we use KiB: 1k = 1024 B).

`trace`: the demo site plus N files (default 3000) under /t/, and one
request log per data set size. The model (a standard synthetic web
workload; the paper replayed the Rice CS department's log, which we do
not have):
  * file sizes: a lognormal body (median 6 KiB, sigma 1.2: most files are
    small pages and images) with a Pareto tail (5% of the files, alpha
    1.2, from 32 KiB, capped at 1 MiB), then every size scaled by one
    factor so that the mean file size is --mean (default 17000 B, the
    paper's "average request size ... about 17KBytes"); at least 100 B;
  * popularity: Zipf-like, P(rank r) ~ 1 / r^A (default A = 0.8, as
    measured for web servers), ranks given to the files in a seeded random
    order, so popularity does not depend on size;
  * data sets: the first K files of that order, K chosen so that their
    bytes reach each target in --datasets (bytes; default "1.5M 3M 6M 12M
    24M 48M", half the default cache budget up to 16 times it); a smaller
    data set is a prefix of a larger one;
  * request logs: for each data set, R requests (default 200000) drawn
    independently from the Zipf distribution over its K files (the
    independent reference model), one path per line: what bench/trace
    replays with wrk (each wrk thread starts at another offset, each
    connection takes the next line).
Every byte of a file is a deterministic stream (SHA-256 in counter mode
over "iolite-bench/<path>/<seed>"), so the manifest's SHA-256 can be
checked against what a server sends.

Leaves in OUT_DIR: site.img and site.manifest (tools/image/make-site-image.sh:
"file /PATH SIZE SHA256" per file), and for `trace` also trace.json (the
parameters, every file's path and size, the data sets with K, bytes and
the mean request size) and requests-<K>.txt per data set. Unchanged
parameters reuse what is there (params.json).
"""
import argparse
import hashlib
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SIZES = [("500", 500), ("1k", 1024), ("2k", 2048), ("3k", 3072), ("5k", 5120), ("7k", 7168), ("10k", 10240),
         ("15k", 15360), ("20k", 20480), ("50k", 51200), ("100k", 102400), ("200k", 204800)]


def size_path(name):
    return f"/sizes/{name}.bin"


def parse_bytes(s):
    s = s.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if s and s[-1] in mult:
        return int(float(s[:-1]) * mult[s[-1]])
    return int(s)


def content(path, seed, size):
    key = f"iolite-bench/{path}/{seed}".encode()
    out = bytearray()
    counter = 0
    while len(out) < size:
        out += hashlib.sha256(key + counter.to_bytes(8, "little")).digest()
        counter += 1
    return bytes(out[:size])


def trace_sizes(rng, n, mean):
    raw = []
    for _ in range(n):
        if rng.random() < 0.05:
            x = 32768 / (rng.random() ** (1 / 1.2))  # Pareto, alpha 1.2, from 32 KiB
            raw.append(min(x, float(1 << 20)))
        else:
            raw.append(rng.lognormvariate(math.log(6144), 1.2))
    scale = mean / (sum(raw) / n)
    return [max(100, min(1 << 20, int(x * scale))) for x in raw]


def zipf_cdf(k, a):
    w = [1.0 / (r ** a) for r in range(1, k + 1)]
    total = sum(w)
    acc, cdf = 0.0, []
    for x in w:
        acc += x / total
        cdf.append(acc)
    cdf[-1] = 1.0
    return cdf


def make_image(stage, out):
    """site/ + `stage` -> OUT/site.img + site.manifest, through
    tools/image/make-site-image.sh (SITE_IMAGE_MB sized to the files)."""
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(stage) for f in fs)
    total += sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(os.path.join(ROOT, "site")) for f in fs)
    nfiles = sum(len(fs) for _, _, fs in os.walk(stage))
    # 4 KiB blocks: every file rounds up; + the generated files (1.5 MiB),
    # inode tables and slack.
    mb = max(8, (total + nfiles * 4096) * 3 // 2 // (1 << 20) + 16)
    env = dict(os.environ, SITE_IMAGE_MB=str(mb))
    subprocess.run([os.path.join(ROOT, "tools", "image", "make-site-image.sh"), stage, out], check=True, env=env,
                   stdout=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kind", choices=["sizes", "trace"])
    ap.add_argument("out")
    ap.add_argument("--files", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--mean", type=int, default=17000)
    ap.add_argument("--zipf", type=float, default=0.8)
    ap.add_argument("--requests", type=int, default=200000)
    ap.add_argument("--datasets", default="1.5M 3M 6M 12M 24M 48M")
    o = ap.parse_args()
    os.makedirs(o.out, exist_ok=True)
    params = {"kind": o.kind, "version": 1}
    if o.kind == "trace":
        params.update(files=o.files, seed=o.seed, mean=o.mean, zipf=o.zipf, requests=o.requests,
                      datasets=[parse_bytes(x) for x in o.datasets.split()])
    stamp = os.path.join(o.out, "params.json")
    if os.path.exists(stamp) and os.path.exists(os.path.join(o.out, "site.img")):
        with open(stamp) as f:
            if json.load(f) == params:
                print(f"sitegen: {o.out} is up to date", file=sys.stderr)
                return
    stage = tempfile.mkdtemp(prefix="iolite-bench-site-")
    try:
        # The demo site first (/, /index.html, the CGI's fragments), then ours.
        shutil.copytree(os.path.join(ROOT, "site"), stage, dirs_exist_ok=True)
        if o.kind == "sizes":
            os.makedirs(os.path.join(stage, "sizes"))
            for name, size in SIZES:
                with open(os.path.join(stage, "sizes", f"{name}.bin"), "wb") as f:
                    f.write(content(size_path(name), 0, size))
        else:
            rng = random.Random(o.seed)
            sizes = trace_sizes(rng, o.files, o.mean)
            files = []
            for i, size in enumerate(sizes):
                path = f"/t/{i // 500:02d}/{i:05d}.bin"  # 500 entries per directory
                full = os.path.join(stage, path.lstrip("/"))
                os.makedirs(os.path.dirname(full), exist_ok=True)
                with open(full, "wb") as f:
                    f.write(content(path, o.seed, size))
                files.append({"path": path, "size": size})
            order = list(range(o.files))
            rng.shuffle(order)  # popularity rank -> file; a data set is a prefix
            datasets = []
            for target in params["datasets"]:
                acc, k = 0, 0
                while k < o.files and acc < target:
                    acc += sizes[order[k]]
                    k += 1
                cdf = zipf_cdf(k, o.zipf)
                lrng = random.Random(f"{o.seed}/{k}")
                total = 0
                name = f"requests-{k}.txt"
                with open(os.path.join(o.out, name), "w") as f:
                    import bisect
                    for _ in range(o.requests):
                        r = bisect.bisect_left(cdf, lrng.random())
                        fi = order[r]
                        total += sizes[fi]
                        f.write(files[fi]["path"] + "\n")
                datasets.append({"target": target, "files": k, "bytes": acc, "log": name,
                                 "mean_request": total / o.requests,
                                 "largest": [files[order[i]]["path"] for i in
                                             sorted(range(k), key=lambda i: -sizes[order[i]])[:64]]})
                print(f"sitegen: data set {k} files, {acc / 1e6:.1f} MB, mean request {total / o.requests:.0f} B",
                      file=sys.stderr)
            with open(os.path.join(o.out, "trace.json"), "w") as f:
                json.dump({"params": params, "mean_file": sum(sizes) / len(sizes), "files": files,
                           "order": order, "datasets": datasets}, f)
        make_image(stage, o.out)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    with open(stamp, "w") as f:
        json.dump(params, f)


if __name__ == "__main__":
    main()
