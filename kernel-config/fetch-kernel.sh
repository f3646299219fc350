#!/usr/bin/env bash
# Fetch the seL4 5.0.0 source tree at build time and unpack it into DEST.
#
# Where it comes from: the crates.io release sel4-sys 0.0.28, which ships the
# complete kernel tree in its seL4/ folder (seL4's own servers are out of
# reach here). tools/fetch-and-patch.sh downloads it through fetch/Cargo.toml,
# verifies the .crate file against the SHA-256 pinned below (the same value
# as in fetch/Cargo.lock), unpacks only its seL4/ folder and applies
# patches/*.patch (each explained in patches/README.md). Nothing of it is
# ever committed to this repository.
#
# usage: fetch-kernel.sh DEST
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
dest=${1:?usage: fetch-kernel.sh DEST}
# shellcheck source=../tools/fetch-and-patch.sh
. "$here/../tools/fetch-and-patch.sh"

readonly KERNEL_VERSION=5.0.0

# Checks and removals before our patches apply.
kernel_tree() {
    local got
    got=$(cat "$1/VERSION")
    if [ "$got" != "$KERNEL_VERSION" ]; then
        echo "fetch-kernel: expected seL4 $KERNEL_VERSION, the tree says $got" >&2
        return 1
    fi
    # The tree's plat autoconf.h is sel4test's configuration; ours replaces
    # it (build-kernel.sh installs it). Removed so it can never be used.
    rm -f "$1/include/plat/pc99/autoconf.h"
}

fetch_and_patch sel4-sys 0.0.28 b42578af4c4eb8468e57beaabecc86541ac3a94eca1e92a611457b71f6034822 \
    "$here/fetch" "$here/patches" "$dest" seL4 kernel_tree
