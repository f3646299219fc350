# Fetch a pinned crates.io release, verify it and apply our patches: the one
# way third-party source enters a build (the seL4 kernel tree, which ships
# inside the sel4-sys crate, and crates we patch such as smoltcp). Sourced by
# kernel-config/fetch-kernel.sh and tools/patched-crates.sh; nothing fetched
# is ever committed.
#
# fetch_and_patch CRATE VERSION SHA256 FETCH_DIR PATCH_DIR OUT [SUBDIR [HOOK]]
#   FETCH_DIR  a throwaway manifest whose Cargo.lock pins the crate's checksum;
#              `cargo fetch --locked` downloads through it
#   SHA256     the .crate file's checksum, verified again here
#   PATCH_DIR  its *.patch files are applied with `patch -p1`, in name order
#   OUT        where the tree ends up (replaced as a whole)
#   SUBDIR     unpack only this folder of the crate (default: all of it)
#   HOOK       a function called with the unpacked tree before the patches
#              (checks and removals specific to one source)
#
# Idempotent: OUT/.iolite-stamp names the crate, its checksum and a hash of
# the patches; if it matches, nothing is done, and changing a patch
# re-unpacks from scratch. The tree is built in a temporary folder beside OUT
# and renamed into place, so a failed or interrupted run never leaves a
# half-patched tree behind.

fetch_and_patch() {
    local crate=$1 version=$2 sha=$3 fetch_dir=$4 patch_dir=$5 out=$6 subdir=${7:-} hook=${8:-}
    local say="fetch-and-patch ($crate $version)"
    local patches_sum want
    patches_sum=$(cat "$patch_dir"/*.patch 2>/dev/null | sha256sum | cut -c1-16)
    want="$crate $version $sha $patches_sum"
    if [ -f "$out/.iolite-stamp" ] && [ "$(cat "$out/.iolite-stamp")" = "$want" ]; then
        return 0
    fi

    local cargo_home=${CARGO_HOME:-$HOME/.cargo}
    cargo fetch --locked --manifest-path "$fetch_dir/Cargo.toml" >&2
    local crate_file
    crate_file=$(ls "$cargo_home"/registry/cache/*/"$crate-$version.crate" 2>/dev/null | head -n 1 || true)
    if [ -z "$crate_file" ]; then
        echo "$say: cargo fetch did not leave $crate-$version.crate in $cargo_home/registry/cache" >&2
        return 1
    fi
    local actual
    actual=$(sha256sum "$crate_file" | cut -d' ' -f1)
    if [ "$actual" != "$sha" ]; then
        echo "$say: checksum mismatch for $crate_file" >&2
        echo "  expected $sha" >&2
        echo "  actual   $actual" >&2
        return 1
    fi

    mkdir -p "$(dirname "$out")"
    local tmp
    tmp=$(mktemp -d "$(dirname "$out")/.tmp-$crate-XXXXXX")
    # shellcheck disable=SC2064 # expand now: the trap must remove this tmp
    trap "rm -rf '$tmp'" EXIT
    local tree="$tmp/tree"
    mkdir "$tree"
    if [ -n "$subdir" ]; then
        local depth
        depth=$(($(tr -cd / <<< "$subdir" | wc -c) + 2))
        tar -xzf "$crate_file" -C "$tree" --strip-components="$depth" "$crate-$version/$subdir"
    else
        tar -xzf "$crate_file" -C "$tree" --strip-components=1 "$crate-$version"
    fi
    if [ -n "$hook" ] && ! "$hook" "$tree"; then
        rm -rf "$tmp"
        return 1
    fi
    local p n=0
    for p in "$patch_dir"/*.patch; do
        [ -e "$p" ] || continue
        if ! patch -s -p1 --no-backup-if-mismatch -d "$tree" < "$p"; then
            echo "$say: $(basename "$p") does not apply" >&2
            rm -rf "$tmp"
            return 1
        fi
        n=$((n + 1))
    done
    echo "$want" > "$tree/.iolite-stamp"
    rm -rf "$out"
    mv "$tree" "$out"
    rm -rf "$tmp"
    trap - EXIT
    echo "$say: sha256 verified, $n patch(es), in $out" >&2
}
