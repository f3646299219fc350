#!/usr/bin/env bash
# Compile the CAmkES assembly and build every component it instantiates.
#
# usage: build-system.sh ASSEMBLY SYSTEM_DIR CARGO_TARGET_DIR [cargo feature args...]
#
# Leaves in SYSTEM_DIR:
#   system.spec   the binary system spec the loader carries out at boot
#   system.txt    the same, readable (for review and for bug reports)
#   glue/         per-component-type Rust glue (IOLITE_GLUE_DIR for the crates)
#   elves.txt     the component ELF (= crate) names the image needs
#   elves/*.elf   those ELFs, stripped; roottask's build.rs embeds them
# The root task is built next (by CMake) with IOLITE_SYSTEM_DIR=SYSTEM_DIR.
# IOLITE_CAMKES_SETTINGS (CMake's CAMKES_SETTINGS): settings that override
# the assembly's, 'instance.attribute=value' separated by '|' (camkes --set).
# Unchanged outputs are not rewritten, so rebuilds stay incremental.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
assembly=${1:?usage}; system_dir=${2:?usage}; target_dir=${3:?usage}; shift 3
rust_target=x86_64-unknown-none
mkdir -p "$system_dir/elves"

cd "$root"
CARGO_TARGET_DIR="$target_dir" cargo build --quiet --release -p camkes
settings=()
IFS='|' read -r -a overrides <<< "${IOLITE_CAMKES_SETTINGS:-}"
for s in "${overrides[@]}"; do
    [ -n "$s" ] && settings+=(--set "$s")
done
"$target_dir/release/camkes" compile \
    --import-path "$root/camkes" "${settings[@]}" \
    --spec-out "$system_dir/system.spec" --spec-text "$system_dir/system.txt" \
    --glue-out "$system_dir/glue" --elf-list "$system_dir/elves.txt" \
    "$assembly"

mapfile -t elves < "$system_dir/elves.txt"
packages=()
for elf in "${elves[@]}"; do
    # A component's crate is a folder of components/ (the system) or of an
    # example's own folder, examples/<name>/.
    crates=("$root/components/$elf/Cargo.toml" "$root"/examples/*/"$elf"/Cargo.toml)
    found=0
    for c in "${crates[@]}"; do [ -f "$c" ] && found=$((found + 1)); done
    if [ "$found" -ne 1 ]; then
        echo "build-system: the assembly instantiates a component of type '$elf'," >&2
        echo "  but there is not exactly one crate components/$elf/ or examples/*/$elf/ (found $found)" >&2
        exit 1
    fi
    packages+=(-p "$elf")
done
IOLITE_GLUE_DIR="$system_dir/glue" CARGO_TARGET_DIR="$target_dir" \
    cargo build --release --target "$rust_target" "${packages[@]}" "$@"

# Replace the embedded set exactly: no stale ELF of an earlier assembly.
for old in "$system_dir"/elves/*.elf; do
    [ -e "$old" ] || continue
    name=$(basename "$old" .elf)
    printf '%s\n' "${elves[@]}" | grep -qx "$name" || rm -f "$old"
done
for elf in "${elves[@]}"; do
    tmp="$system_dir/elves/$elf.elf.tmp"
    objcopy --strip-debug "$target_dir/$rust_target/release/$elf" "$tmp"
    if cmp -s "$tmp" "$system_dir/elves/$elf.elf"; then rm -f "$tmp"; else mv "$tmp" "$system_dir/elves/$elf.elf"; fi
done
