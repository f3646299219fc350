#!/usr/bin/env bash
# Unpack pinned crates.io releases and apply our patches to them, for Cargo's
# [patch.crates-io] in the root Cargo.toml.
#
# We never copy a third-party crate's source into this repository. Instead,
# for each crate listed below: Cargo downloads the pinned release through a
# throwaway manifest (patches/<crate>/fetch/, whose Cargo.lock pins the
# checksum), we verify the .crate file's SHA-256 against the value pinned
# here, unpack it into DEST/<crate>-<version>/ and apply
# patches/<crate>/*.patch in name order with `patch -p1`. The same approach as
# kernel-config/fetch-kernel.sh uses for the seL4 sources.
#
# Idempotent: a stamp names the crate, its checksum and a hash of our patches;
# if it matches, nothing is done. Changing a patch re-unpacks from scratch.
# The tree is built in a temporary folder and renamed into place, so a failed
# or interrupted run never leaves a half-patched crate behind.
#
# usage: tools/patched-crates.sh [DEST]     (default: <repo>/.patched-crates)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dest=${1:-$root/.patched-crates}

# crate  version  sha256 of the .crate file (as in patches/<crate>/fetch/Cargo.lock)
crates=(
    "smoltcp 0.14.0 b6f8b28ad56c6e35524a37dd492af5d1a47e31e1a4d175cd12f89c075f01980f"
)

say() { echo "patched-crates: $*" >&2; }

tmp=
trap '[ -z "$tmp" ] || rm -rf "$tmp"' EXIT

prepare() {
    local crate=$1 version=$2 sha=$3
    local pdir="$root/patches/$crate"
    local out="$dest/$crate-$version"
    local patches_sum
    patches_sum=$(cat "$pdir"/*.patch 2>/dev/null | sha256sum | cut -c1-16)
    local stamp_name=".iolite-stamp"
    local want="$crate $version $sha $patches_sum"
    if [ -f "$out/$stamp_name" ] && [ "$(cat "$out/$stamp_name")" = "$want" ]; then
        return 0
    fi

    local cargo_home=${CARGO_HOME:-$HOME/.cargo}
    cargo fetch --locked --manifest-path "$pdir/fetch/Cargo.toml" >&2
    local crate_file
    crate_file=$(ls "$cargo_home"/registry/cache/*/"$crate-$version.crate" 2>/dev/null | head -n 1 || true)
    if [ -z "$crate_file" ]; then
        say "cargo fetch did not leave $crate-$version.crate in $cargo_home/registry/cache"
        exit 1
    fi
    local actual
    actual=$(sha256sum "$crate_file" | cut -d' ' -f1)
    if [ "$actual" != "$sha" ]; then
        say "checksum mismatch for $crate_file"
        say "  expected $sha"
        say "  actual   $actual"
        exit 1
    fi

    mkdir -p "$dest"
    tmp=$(mktemp -d "$dest/.tmp-$crate-XXXXXX")
    tar -xzf "$crate_file" -C "$tmp"
    local tree="$tmp/$crate-$version"
    [ -f "$tree/Cargo.toml" ] || { say "$crate_file has no $crate-$version/Cargo.toml"; exit 1; }
    local p n=0
    for p in "$pdir"/*.patch; do
        [ -e "$p" ] || continue
        if ! patch -s -p1 --no-backup-if-mismatch -d "$tree" < "$p"; then
            say "$(basename "$p") does not apply to $crate $version"
            exit 1
        fi
        n=$((n + 1))
    done
    echo "$want" > "$tree/$stamp_name"
    rm -rf "$out"
    mv "$tree" "$out"
    rm -rf "$tmp"
    tmp=
    say "$crate $version (sha256 verified) + $n patch(es) in $out"
}

for entry in "${crates[@]}"; do
    # shellcheck disable=SC2086
    prepare $entry
done
