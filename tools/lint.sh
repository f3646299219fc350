#!/usr/bin/env bash
# rustfmt and clippy over the whole tree, warnings as errors.
#
# usage: tools/lint.sh BUILD_DIR
#
# Host crates are linted as `cargo test` builds them. The seL4-only crates
# (components, the root task) need the glue the CAmkES compiler made for an
# assembly, so they are linted against images already built: BUILD_DIR (the
# whole system) and every BUILD_DIR/variants/*; each component crate once,
# with the glue of the first image that instantiates it. Prints one line per
# check ("lint <what>: PASS|FAIL") and exits non-zero if any failed.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=$(cd "${1:?usage: tools/lint.sh BUILD_DIR}" && pwd)
cd "$root"
export SEL4_SOURCE="$build_dir/kernel-src"
status=0

check() {
    local what=$1; shift
    local log
    log=$(mktemp)
    if "$@" >"$log" 2>&1; then
        echo "lint $what: PASS"
    else
        echo "lint $what: FAIL"
        tail -60 "$log"
        status=1
    fi
    rm -f "$log"
}

check rustfmt cargo fmt --all -- --check
check "clippy (host crates)" cargo clippy --all-targets -- -D warnings

# Component crate -> the glue folder of the first image that has it.
declare -A glue_of=()
order=()
for dir in "$build_dir" "$build_dir"/variants/*; do
    [ -f "$dir/system/elves.txt" ] || continue
    while read -r elf; do
        [ -n "$elf" ] || continue
        if [ -z "${glue_of[$elf]:-}" ]; then
            glue_of[$elf]="$dir/system/glue"
            order+=("$elf")
        fi
    done < "$dir/system/elves.txt"
done
for elf in "${order[@]}"; do
    check "clippy ($elf)" env IOLITE_GLUE_DIR="${glue_of[$elf]}" \
        cargo clippy --release --target x86_64-unknown-none -p "$elf" -- -D warnings
done
if [ -f "$build_dir/system/system.spec" ]; then
    check "clippy (roottask)" env IOLITE_SYSTEM_DIR="$build_dir/system" \
        cargo clippy --release --target x86_64-unknown-none -p roottask -- -D warnings
fi
exit $status
