#!/usr/bin/env bash
# Fuzzes the ext2 image parser (target `image`) for N seconds (default 60).
# Exits non-zero if libFuzzer finds a crash, hang or leak; the reproducer is
# then in components/fs/fuzz/artifacts/image/.
#
#   components/fs/fuzz/run.sh 60
#
# Needs: a nightly toolchain (rustup's `nightly`), cargo-fuzz (installed from
# crates.io here if missing), mke2fs (e2fsprogs) for the seed images.
set -euo pipefail
secs="${1:-60}"
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
export PATH="$PATH:/usr/sbin:/sbin"

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    # cargo-fuzz needs nightly (sanitizer flags); the project builds on the
    # pinned stable toolchain otherwise.
    rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked --version 0.13.2
fi
command -v mke2fs >/dev/null || { echo "run.sh: mke2fs missing (apt-get install e2fsprogs)" >&2; exit 2; }

# Seed corpus: small real images (1 KiB and 2 KiB blocks) of a tree with a
# subdirectory, an indirect-block file, a sparse file and symlinks, so the
# fuzzer starts from valid filesystems instead of searching for the magic.
corpus="$here/corpus/image"
mkdir -p "$corpus"
if [ -z "$(ls -A "$corpus")" ]; then
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    mkdir -p "$tmp/site/dir/sub"
    printf 'hello\n' > "$tmp/site/index.html"
    head -c 20000 /dev/urandom > "$tmp/site/dir/indirect.bin"
    truncate -s 300000 "$tmp/site/dir/sparse.bin"
    printf 'x' > "$tmp/site/dir/sub/one"
    ln -s ../index.html "$tmp/site/dir/link"
    ln -s /dir/sub/one "$tmp/site/abs"
    for bs in 1024 2048; do
        mke2fs -q -F -t ext2 -b "$bs" -N 32 -d "$tmp/site" "$corpus/seed-$bs.img" 192k
    done
fi

exec cargo +nightly fuzz run image "$corpus" -- \
    -max_total_time="$secs" -max_len=262144 -timeout=10 -rss_limit_mb=2048
