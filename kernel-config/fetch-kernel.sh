#!/usr/bin/env bash
# Fetch the seL4 5.0.0 source tree at build time and unpack it into DEST.
#
# Where it comes from: the crates.io release sel4-sys 0.0.28, which ships the
# complete kernel tree in its seL4/ folder (seL4's own servers are out of
# reach here). Cargo downloads it through fetch/Cargo.toml; we then verify the
# .crate file against the SHA-256 pinned below (the same value as in
# fetch/Cargo.lock), unpack only its seL4/ folder and apply patches/*.patch.
# Nothing of it is ever committed to this repository.
#
# usage: fetch-kernel.sh DEST
set -euo pipefail

readonly CRATE=sel4-sys
readonly VERSION=0.0.28
readonly SHA256=b42578af4c4eb8468e57beaabecc86541ac3a94eca1e92a611457b71f6034822
readonly KERNEL_VERSION=5.0.0

here=$(cd "$(dirname "$0")" && pwd)
dest=${1:?usage: fetch-kernel.sh DEST}
# The stamp names the crate and our patches, so changing a patch re-fetches.
patches_sum=$(cat "$here"/patches/*.patch 2>/dev/null | sha256sum | cut -c1-16)
stamp="$dest/.fetched-$CRATE-$VERSION-$SHA256-$patches_sum"
[ -f "$stamp" ] && exit 0

cargo_home=${CARGO_HOME:-$HOME/.cargo}
cargo fetch --locked --manifest-path "$here/fetch/Cargo.toml" >&2
crate_file=$(ls "$cargo_home"/registry/cache/*/"$CRATE-$VERSION.crate" 2>/dev/null | head -n 1 || true)
if [ -z "$crate_file" ]; then
    echo "fetch-kernel: cargo fetch did not leave $CRATE-$VERSION.crate in $cargo_home/registry/cache" >&2
    exit 1
fi
actual=$(sha256sum "$crate_file" | cut -d' ' -f1)
if [ "$actual" != "$SHA256" ]; then
    echo "fetch-kernel: checksum mismatch for $crate_file" >&2
    echo "  expected $SHA256" >&2
    echo "  actual   $actual" >&2
    exit 1
fi

rm -rf "$dest"
mkdir -p "$dest"
tar -xzf "$crate_file" -C "$dest" --strip-components=2 "$CRATE-$VERSION/seL4"
got=$(cat "$dest/VERSION")
if [ "$got" != "$KERNEL_VERSION" ]; then
    echo "fetch-kernel: expected seL4 $KERNEL_VERSION, the tree says $got" >&2
    exit 1
fi
# The tree's plat autoconf.h is sel4test's configuration; ours replaces it
# (build-kernel.sh installs it). Remove the original so it can never be used.
rm -f "$dest/include/plat/pc99/autoconf.h"
# Our few fixes to the 5.0.0 tree, each explained in patches/README.md.
for p in "$here"/patches/*.patch; do
    [ -e "$p" ] || continue
    patch -s -p1 -d "$dest" < "$p"
done
touch "$stamp"
echo "fetch-kernel: seL4 $got from $CRATE $VERSION (sha256 verified) in $dest" >&2
