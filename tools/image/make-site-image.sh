#!/usr/bin/env bash
# Turn the demo site into an ext2 image for the fs component.
#
# usage: make-site-image.sh SITE_DIR OUT_DIR
#
# Leaves in OUT_DIR:
#   site.img        ext2 (tools/image/make-disk: mke2fs -t ext2 -d), 8 MiB (SITE_IMAGE_MB: more,
#                   for the benchmarks' larger sites), 4 KiB blocks: what
#                   `simulate --disk` attaches as the virtio-blk disk
#   site.manifest   one line per regular file, sorted by path:
#                   "file /PATH SIZE SHA256" (the format fs_reader prints,
#                   so tests/robot/filesystem.robot compares line by line)
#
# SITE_DIR is copied as is, plus the large files generated here from a
# fixed seed (they are not committed): a deterministic byte stream per file
# (SHA-256 in counter mode over "iolite-site/<name>/<seed>"), so every
# build makes the same bytes. Timestamps are fixed (SOURCE_DATE_EPOCH,
# default 1700000000) so that mtimes, and ETags built from them, are stable.
# Unchanged outputs are not rewritten. SITE_CONFIG=FILE puts FILE on the
# disk as /.iolite/config.
set -euo pipefail

site=${1:?usage: make-site-image.sh SITE_DIR OUT_DIR}
out=${2:?usage: make-site-image.sh SITE_DIR OUT_DIR}
seed=${SITE_SEED:-6}
epoch=${SOURCE_DATE_EPOCH:-1700000000}
image_mb=${SITE_IMAGE_MB:-8}

# name size: the generated files.
generated=(
    "file-16k.bin 16384"
    "file-64k.bin 65536"
    "file-256k.bin 262144"
    "file-1m.bin 1048576"
    "odd-4097.bin 4097"
    "odd-100000.bin 100000"
)

mkdir -p "$out"
stage=$(mktemp -d "${TMPDIR:-/tmp}/iolite-site.XXXXXX")
trap 'rm -rf "$stage"' EXIT

cp -a "$site/." "$stage/"
# SITE_CONFIG=FILE: the disk's deployment values (docs/config.md), checked
# by make-disk like any site's /.iolite/config.
if [ -n "${SITE_CONFIG:-}" ]; then
    mkdir -p "$stage/.iolite"
    cp "$SITE_CONFIG" "$stage/.iolite/config"
fi
for g in "${generated[@]}"; do
    read -r name size <<<"$g"
    python3 - "$stage/$name" "$size" "$name" "$seed" <<'PY'
import hashlib, sys
path, size, name, seed = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
key = f"iolite-site/{name}/{seed}".encode()
with open(path, "wb") as f:
    n, counter = 0, 0
    while n < size:
        block = hashlib.sha256(key + counter.to_bytes(8, "little")).digest()
        f.write(block[: size - n])
        n += len(block[: size - n])
        counter += 1
PY
done
find "$stage" -exec touch -h -d "@$epoch" {} +

(cd "$stage" && find . -type f | LC_ALL=C sort | while read -r f; do
    printf 'file %s %s %s\n' "${f#.}" "$(stat -c %s "$f")" "$(sha256sum "$f" | cut -d' ' -f1)"
done) > "$out/site.manifest.tmp"

# The same checks and mke2fs call as `./iolite image --site`, at the fixed
# size the benchmarks expect; the epoch makes the image reproducible.
"$(dirname "$0")/make-disk" --size "$image_mb" --epoch "$epoch" "$stage" "$out/site.img.tmp" >/dev/null

for f in site.img site.manifest; do
    if cmp -s "$out/$f.tmp" "$out/$f"; then rm -f "$out/$f.tmp"; else mv "$out/$f.tmp" "$out/$f"; fi
done
echo "make-site-image: $out/site.img ($(wc -l < "$out/site.manifest") files)"
