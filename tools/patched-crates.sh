#!/usr/bin/env bash
# Unpack pinned crates.io releases and apply our patches to them, for Cargo's
# [patch.crates-io] in the root Cargo.toml.
#
# We never copy a third-party crate's source into this repository. For each
# crate listed below, tools/fetch-and-patch.sh (the same code that fetches
# the seL4 sources) downloads the pinned release through a throwaway
# manifest (patches/<crate>/fetch/, whose Cargo.lock pins the checksum),
# verifies the .crate file's SHA-256 against the value pinned here, unpacks
# it into DEST/<crate>-<version>/ and applies patches/<crate>/*.patch in name
# order. Idempotent; an interrupted run never leaves a half-patched crate.
#
# usage: tools/patched-crates.sh [DEST]     (default: <repo>/.patched-crates)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dest=${1:-$root/.patched-crates}
# shellcheck source=fetch-and-patch.sh
. "$root/tools/fetch-and-patch.sh"

# crate  version  sha256 of the .crate file (as in patches/<crate>/fetch/Cargo.lock)
crates=(
    "smoltcp 0.14.0 b6f8b28ad56c6e35524a37dd492af5d1a47e31e1a4d175cd12f89c075f01980f"
)

for entry in "${crates[@]}"; do
    read -r crate version sha <<< "$entry"
    fetch_and_patch "$crate" "$version" "$sha" "$root/patches/$crate/fetch" "$root/patches/$crate" \
        "$dest/$crate-$version"
done
