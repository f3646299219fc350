#!/usr/bin/env bash
# rustfmt and clippy over the whole tree, warnings as errors.
#
# usage: tools/lint.sh BUILD_DIR
#
# Host crates are linted as `cargo test` builds them, component crates
# against the glue of an assembly (below), and the root task against the
# image built in BUILD_DIR (it embeds that system). Prints one line per
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

# The seL4-only crates need an assembly's glue: the CAmkES compiler makes
# it for camkes/iolite.camkes and every examples/*/*.camkes (cheap, and it covers the examples no
# test image boots); each component crate is linted once, with the glue of
# the first assembly that instantiates it.
cargo build --quiet --release -p camkes || exit 1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
declare -A glue_of=()
order=()
for assembly in camkes/iolite.camkes examples/*/*.camkes; do
    out="$scratch/$(basename "$assembly" .camkes)"
    mkdir -p "$out"
    if ! "${CARGO_TARGET_DIR:-target}/release/camkes" compile --import-path camkes --spec-out "$out/system.spec" \
        --glue-out "$out/glue" --elf-list "$out/elves.txt" "$assembly" >"$out/log" 2>&1; then
        echo "lint glue ($assembly): FAIL"; cat "$out/log"; status=1; continue
    fi
    while read -r elf; do
        [ -n "$elf" ] || continue
        if [ -z "${glue_of[$elf]:-}" ]; then
            glue_of[$elf]="$out/glue"
            order+=("$elf")
        fi
    done < "$out/elves.txt"
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
