# shellcheck shell=bash
# scripts/deps.sh: Debian package checks shared by scripts/test and
# scripts/bench. Source it; it defines functions and package lists only.
#
#   weft_need_packages PKG...
#       Installs the named Debian packages that are not installed yet.
#       As root: `apt-get update` (at most once per shell) and a
#       non-interactive `apt-get install`. Not root: prints the exact
#       install command to run and exits 1. Returns 0 when nothing is missing.
#
# The package names are Debian 12 (bookworm) names.

# What every native build needs: the toolchain, the generator, GoogleTest
# (the test targets are on in every preset but `bench`), and pkg-config for
# the install check; liburing-dev for the io_uring backend (L6); gdb and
# python3 for the gdb tests, python3-matplotlib for the trace check (which
# draws the trace), curl for the HTTP example's test (examples/16_http_server_curl.sh),
# redis-tools (redis-cli, redis-benchmark) for the Redis example's test
# (examples/17_redis_server_cli.sh).
# shellcheck disable=SC2034  # used by the scripts that source this file
WEFT_PKGS_BASE=(cmake ninja-build g++ libgtest-dev googletest pkgconf liburing-dev gdb python3 python3-matplotlib curl redis-tools)
# clang-* presets: the compiler and its runtime libraries (sanitizers).
# shellcheck disable=SC2034  # used by the scripts that source this file
WEFT_PKGS_CLANG=(clang-14 libclang-rt-14-dev)
# aarch64-* presets: the cross compiler and libc (pulled in by the cross
# g++), the emulator CTest runs the tests under, and GoogleTest's sources
# (/usr/src/googletest), which the cross build compiles for the target;
# gdb-multiarch for the gdb tests (tests/gdb, through qemu-aarch64).
# shellcheck disable=SC2034  # used by the scripts that source this file
WEFT_PKGS_AARCH64=(g++-aarch64-linux-gnu qemu-user googletest gdb-multiarch)
# scripts/bench: Boost.Context (fcontext and fiber peers), Boost.Fiber (the
# runtime section's peer), Boost.Asio (libboost-dev: R8's echo peer),
# matplotlib for the report's charts (Debian's python3), valgrind for the
# callgrind counts, taskset (util-linux) for R8's pinned servers, wrk for
# the HTTP row's load (bench/compare/io/http.py), redis-server (R9's
# reference row) and strace (R9b's system call counts; bench/compare/io/r9.py,
# whose load, redis-benchmark, comes with redis-tools in WEFT_PKGS_BASE).
# shellcheck disable=SC2034  # used by the scripts that source this file
WEFT_PKGS_BENCH=(libboost-context-dev libboost-fiber-dev libboost-dev libbenchmark-dev python3-matplotlib valgrind util-linux wrk redis-server strace)
# scripts/bench, optional: the Go peer. Without it the report says
# "Go: not available" instead of failing.
# shellcheck disable=SC2034  # used by the scripts that source this file
WEFT_PKGS_BENCH_GO=(golang-go)

# weft_missing_packages PKG... prints, one a line, the packages dpkg does not
# report as installed.
weft_missing_packages() {
    local pkg status
    for pkg in "$@"; do
        status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
        if [[ "$status" != installed ]]; then
            printf '%s\n' "$pkg"
        fi
    done
}

weft_need_packages() {
    if [[ $# -eq 0 ]]; then
        return 0
    fi
    if ! command -v dpkg-query >/dev/null 2>&1; then
        echo "weft: not a Debian system (no dpkg-query); make sure the equivalents of these are installed:" >&2
        echo "  $*" >&2
        return 0
    fi

    # De-duplicate, keeping the order of first appearance.
    local -a wanted=() missing=()
    local pkg seen=" "
    for pkg in "$@"; do
        if [[ "$seen" != *" $pkg "* ]]; then
            wanted+=("$pkg")
            seen+="$pkg "
        fi
    done
    mapfile -t missing < <(weft_missing_packages "${wanted[@]}")
    if [[ ${#missing[@]} -eq 0 ]]; then
        return 0
    fi

    if [[ $(id -u) -ne 0 ]]; then
        echo "weft: missing Debian packages: ${missing[*]}" >&2
        echo "weft: install them with:" >&2
        echo "  sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
        exit 1
    fi

    echo "weft: installing missing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if [[ -z "${WEFT_APT_UPDATED:-}" ]]; then
        apt-get update </dev/null || { echo "weft: apt-get update failed" >&2; exit 1; }
        WEFT_APT_UPDATED=1
    fi
    apt-get install -y --no-install-recommends "${missing[@]}" </dev/null ||
        { echo "weft: apt-get install ${missing[*]} failed" >&2; exit 1; }

    mapfile -t missing < <(weft_missing_packages "${missing[@]}")
    if [[ ${#missing[@]} -ne 0 ]]; then
        echo "weft: still missing after apt-get install: ${missing[*]}" >&2
        exit 1
    fi
}

# weft_prune_build DIR deletes the bulky products of a finished build under
# DIR (objects, precompiled headers, libraries, executables) and keeps the
# text it left (CTest logs, valgrind logs, the configure files). It does this
# only when WEFT_PRUNE_BUILDS is 1, which is the default under CI=true: a
# full CI run builds nine trees of about 2 GB each, and CI shares this
# machine's disk (one landing failed with "No space left on device" in the
# fifth tree). Locally nothing is deleted unless asked for.
weft_prune_build() {
    local dir=$1 before after
    [[ ${WEFT_PRUNE_BUILDS:-$([[ ${CI:-} == true ]] && echo 1 || echo 0)} == 1 ]] || return 0
    [[ -d $dir ]] || return 0
    before=$(du -sm "$dir" | cut -f1)
    find "$dir" -type f \( -name '*.o' -o -name '*.gch' -o -name '*.a' -o -name '*.so' \
        -o -name '*.so.*' -o -perm -u+x \) -delete
    after=$(du -sm "$dir" | cut -f1)
    echo "-- pruned $dir: ${before} MB -> ${after} MB (WEFT_PRUNE_BUILDS=1)"
}
