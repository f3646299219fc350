# Shared steps of the web benchmarks (bench/web, sizes, trace, slow, cgi):
# source it from a bench script after setting `root` (the repository).
#
#   bench_setup [h2load] [wrk]   the venv (./iolite setup when missing) and
#                                the Debian load generators asked for
#   bench_need_tap               root, unshare and ip, for the TAP namespace
#   bench_build MODE [VARIANT SETTINGS]
#                                builds camkes/iolite.camkes with COPY_MODE=MODE
#                                and the cgi's test hooks (/cgi-bin/blob) into
#                                build/bench-web-MODE (+ "-VARIANT" with the
#                                extra CAMKES_SETTINGS, '|'-separated), a cargo
#                                target folder each; prints the folder
#   bench_linux SITE_IMAGE [DIR] the reference system (bench/linux-nginx) for
#                                that site, in DIR (default build/bench-linux)
#
# The images are shared by every bench script: a mode is built once, later
# runs only pay for what changed.

bench_setup() {
    [ -x "$root/.venv/bin/python" ] || "$root/iolite" setup
    local t pkg
    for t in "$@"; do
        case "$t" in
            h2load) pkg=nghttp2-client ;;
            wrk) pkg=wrk ;;
            perf) pkg=linux-perf ;;
            dpkg-deb) pkg=dpkg ;;
            readelf | objcopy) pkg=binutils ;;
            debugfs) pkg=e2fsprogs ;;
            dnsmasq) pkg=dnsmasq-base ;;
            *) pkg=$t ;;
        esac
        command -v "$t" >/dev/null || {
            echo "==> installing $t (apt: $pkg)" >&2
            apt-get install -y "$pkg" >/dev/null || { apt-get update -qq && apt-get install -y "$pkg" >/dev/null; }
        }
    done
}

bench_need_tap() {
    [ "$(id -u)" = 0 ] || { echo "$(basename "$0"): TAP needs root (a network namespace and a TAP device)" >&2; exit 1; }
    local t
    for t in unshare ip; do
        command -v $t >/dev/null || { echo "$(basename "$0"): $t is missing (apt install util-linux iproute2)" >&2; exit 1; }
    done
}

# bench_build MODE [VARIANT [SETTINGS [RELEASE]]]: builds the demo image in
# copy mode MODE with the assembly settings SETTINGS as
# build/bench-web-MODE[-VARIANT]; RELEASE=ON takes the release kernel (no
# kernel assertions and no per-thread CPU accounting, hence no liveness
# check), OFF (default) the debug kernel the tests use.
bench_build() {
    local mode=$1 variant=${2:-} extra=${3:-} release=${4:-OFF}
    local settings="cgi.test_hooks=1${extra:+|$extra}"
    bench_build_tree "$root" "bench-web-$mode${variant:+-$variant}" "$mode" "$settings" "$release"
}

# bench_build_rev MODE REV: the image of git revision REV, built from a
# worktree of it (build/worktrees/SHORT) into build/bench-web-MODE-at-SHORT
# with the settings bench_build uses; prints the system's name,
# MODE-at-SHORT. For a change's before and after measured in one run.
bench_build_rev() {
    local mode=$1 rev=$2 short src
    short=$(git -C "$root" rev-parse --short "$rev^{commit}") || { echo "$(basename "$0"): no revision $rev" >&2; exit 2; }
    src="$root/build/worktrees/$short"
    if [ ! -d "$src" ]; then
        git -C "$root" worktree prune
        git -C "$root" worktree add --detach "$src" "$short" >/dev/null
    fi
    bench_build_tree "$src" "bench-web-$mode-at-$short" "$mode" "cgi.test_hooks=1" OFF >/dev/null
    echo "$mode-at-$short"
}

# bench_build_tree SRC NAME MODE SETTINGS RELEASE: the whole system from
# source tree SRC in build/NAME (its own cargo target directory; the
# tree's Python venv, which a worktree lacks); prints the directory.
bench_build_tree() {
    local src=$1 name=$2 mode=$3 settings=$4 release=$5
    local dir="$root/build/$name"
    echo "==> building $dir (from $src, COPY_MODE=$mode, $settings, RELEASE=$release)" >&2
    cmake -S "$src" -B "$dir" -G Ninja -DPLATFORM=pc99 -DRELEASE="$release" -DSIMULATION=ON \
        -DASSEMBLY="$src/camkes/iolite.camkes" -DCOPY_MODE="$mode" -DCAMKES_SETTINGS="$settings" \
        -DPYTHON="$root/.venv/bin/python" -DCARGO_TARGET_DIR="$root/target/$name" >/dev/null
    if ! nice ninja -C "$dir" >"$dir/bench-build.log" 2>&1; then
        tail -40 "$dir/bench-build.log" >&2
        echo "$(basename "$0"): building $dir failed" >&2
        exit 1
    fi
    echo "$dir"
}

bench_linux() {
    echo "==> building the reference system (bench/linux-nginx) for $1" >&2
    "$root/bench/linux-nginx" --out "${2:-$root/build/bench-linux}" --site "$1" >&2
}
