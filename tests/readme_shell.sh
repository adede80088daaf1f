#!/usr/bin/env bash
# readme_shell.sh: the README's install instructions work as written. It
# installs a build into a temporary prefix and runs each README code block
# that follows a "<!-- readme-shell: NAME -->" marker, with /opt/weft (the
# README's prefix) replaced by the temporary one and nothing else changed:
#   pkg-config   its shell lines run in bash, in a directory holding app.cpp
#                and app.c (tests/install/main.cpp and main.c); ./app and
#                ./app_c must print OK;
#   cmake        its lines go into a consumer CMakeLists.txt after
#                add_executable(app app.cpp), configured with
#                -DCMAKE_PREFIX_PATH=<prefix> as the block's comment says;
#   cmake-hook   the same after find_package(weft REQUIRED), app.cpp being
#                tests/install/hook_main.cpp (skipped with --no-hook).
# A marker the README lacks fails the test, so a renamed block is noticed.
# PKG_CONFIG_PATH is cleared first: a line that does not set it for the
# pkg-config it runs fails here as it would for a reader.
# Usage: readme_shell.sh SOURCE_DIR BUILD_DIR [--no-hook] [--readme FILE]
set -euo pipefail

src=$1
build=$2
shift 2
hook=1
readme="$src/README.md"
while [[ $# -gt 0 ]]; do
    case $1 in
    --no-hook) hook=0 ;;
    --readme) readme=$2; shift ;;
    *) echo "readme_shell: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

work=$(mktemp -d "${TMPDIR:-/tmp}/weft-readme-shell.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"

# block NAME prints the lines of the code block after the marker NAME.
block() {
    awk -v name="$1" '
        $0 == "<!-- readme-shell: " name " -->" { marked = 1; next }
        marked && /^```/ { if (inside) exit; inside = 1; next }
        inside { print }
    ' "$readme"
}

# lines NAME is block NAME with the README's prefix replaced; fails if empty.
lines() {
    local text
    text=$(block "$1")
    if [[ -z "$text" ]]; then
        echo "readme_shell: README.md has no block after <!-- readme-shell: $1 -->" >&2
        return 1
    fi
    printf '%s\n' "${text//\/opt\/weft/$prefix}"
}

# expect_ok PROGRAM runs it and checks that it printed OK.
expect_ok() {
    local out
    out=$(LD_LIBRARY_PATH="$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@") || {
        printf '%s\n' "$out"
        echo "readme_shell: $* failed" >&2
        return 1
    }
    printf '%s\n' "$out"
    [[ "$out" == *OK* ]] || { echo "readme_shell: $* did not print OK" >&2; return 1; }
}

pkg_lines=$(lines pkg-config)
cmake_lines=$(lines cmake)
if [[ $hook == 1 ]]; then hook_lines=$(lines cmake-hook); fi

echo "-- cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log" || { cat "$work/install.log"; exit 1; }

echo "-- the README's pkg-config lines"
mkdir "$work/pc"
cp "$src/tests/install/main.cpp" "$work/pc/app.cpp"
cp "$src/tests/install/main.c" "$work/pc/app.c"
printf '%s\n' "$pkg_lines"
(cd "$work/pc" && env -u PKG_CONFIG_PATH bash -euo pipefail -c "$pkg_lines")
expect_ok "$work/pc/app"
expect_ok "$work/pc/app_c"

# consumer DIR MAIN LINES: a CMake project building MAIN as app with LINES.
consumer() {
    mkdir "$1"
    cp "$2" "$1/app.cpp"
    {
        echo "cmake_minimum_required(VERSION 3.25)"
        echo "project(app LANGUAGES CXX)"
        [[ $4 == with-find ]] && echo "find_package(weft REQUIRED)"
        echo "add_executable(app app.cpp)"
        printf '%s\n' "$3"
    } >"$1/CMakeLists.txt"
    cat "$1/CMakeLists.txt"
    cmake -S "$1" -B "$1/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_PREFIX_PATH="$prefix" \
        >"$1/configure.log" || { cat "$1/configure.log"; return 1; }
    cmake --build "$1/build" >"$1/build.log" || { cat "$1/build.log"; return 1; }
    expect_ok "$1/build/app"
}

echo "-- the README's CMake lines"
consumer "$work/cmake" "$src/tests/install/main.cpp" "$cmake_lines" plain
if [[ $hook == 1 ]]; then
    echo "-- the README's hook lines"
    consumer "$work/hook" "$src/tests/install/hook_main.cpp" "$hook_lines" with-find
fi
echo "readme_shell: ok"
