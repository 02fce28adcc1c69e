#!/usr/bin/env bash
# Usage: run_consumer.sh BUILD_DIR CONSUMER_SOURCE_DIR SCRATCH_DIR PROJECT_VERSION
# Env: CMAKE_COMMAND, CC, PYTHON, MOESTREAM_SOURCE_DIR.
set -euo pipefail
build=$1 here=$2 scratch=$3 version=$4
cmake_cmd=${CMAKE_COMMAND:-cmake} cc=${CC:-cc} python=${PYTHON:-python3}

rm -rf "$scratch"
mkdir -p "$scratch"
trap 'rm -rf "$scratch"' EXIT
prefix=$scratch/prefix
log=$scratch/log
step() { echo "== $*"; }
fail() { echo "FAIL: $*"; [ -f "$log" ] && tail -n 40 "$log"; exit 1; }

step "cmake --install into $prefix"
"$cmake_cmd" --install "$build" --prefix "$prefix" >"$log" 2>&1 || fail "install failed"
lib=$(find "$prefix" -name "libmoestream.so.*" -type f | head -n 1)
[ -n "$lib" ] || fail "no libmoestream.so.* installed"
libdir=$(dirname "$lib")

step "pkg-config"
export PKG_CONFIG_PATH=$libdir/pkgconfig
pc_libdir=$(pkg-config --variable=libdir moestream) || fail "pkg-config cannot find moestream"
[ "$(realpath "$pc_libdir")" = "$(realpath "$libdir")" ] || fail "moestream.pc libdir is $pc_libdir; library is in $libdir"
[ -f "$(pkg-config --variable=includedir moestream)/moestream.h" ] || fail "moestream.pc includedir has no moestream.h"
[ "$(pkg-config --modversion moestream)" = "$version" ] || fail "moestream.pc version is not $version"
# shellcheck disable=SC2046
"$cc" -std=c99 -Wall -Wextra -Werror "$here/consumer.c" -o "$scratch/consumer_pc" \
  $(pkg-config --cflags --libs moestream) -Wl,-rpath,"$pc_libdir" >"$log" 2>&1 || fail "pkg-config build failed"
out=$("$scratch/consumer_pc") || fail "pkg-config consumer failed: $out"
[ "$(head -n 1 <<<"$out")" = "$version" ] || fail "pkg-config consumer printed '$out'"

step "docs/quickstart.c on a generated model"
"$cc" -std=c99 -Wall -Wextra -Werror "$MOESTREAM_SOURCE_DIR/docs/quickstart.c" -o "$scratch/quickstart" \
  $(pkg-config --cflags --libs moestream) -Wl,-rpath,"$pc_libdir" >"$log" 2>&1 || fail "quickstart build failed"
"$prefix/bin/moestream" generate --preset tiny --quant f32 -o "$scratch/tiny.gguf" >"$log" 2>&1 ||
  fail "installed moestream generate failed"
out=$("$scratch/quickstart" "$scratch/tiny.gguf" 2>"$log") || fail "quickstart failed"
grep -qE '^[0-9]+( [0-9]+)* ?$' <<<"$out" || fail "quickstart printed '$out'"
rm -f "$scratch/tiny.gguf"

step "find_package(moestream)"
"$cmake_cmd" -S "$here/project" -B "$scratch/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_C_COMPILER="$cc" >"$log" 2>&1 || fail "consumer configure failed"
"$cmake_cmd" --build "$scratch/cmake-build" >"$log" 2>&1 || fail "consumer build failed"
out=$("$scratch/cmake-build/consumer") || fail "find_package consumer failed: $out"
[ "$(head -n 1 <<<"$out")" = "$version" ] || fail "find_package consumer printed '$out'"

step "installed Python package without MOESTREAM_LIB"
site=$(dirname "$(find "$prefix" -path "*/moestream/__init__.py" | head -n 1)")/..
out=$(cd "$scratch" && env -u MOESTREAM_LIB PYTHONPATH="$site" PYTHONDONTWRITEBYTECODE=1 "$python" -c \
  'import moestream; print(moestream.version()); print(moestream.library_path())') || fail "import failed"
[ "$(sed -n 1p <<<"$out")" = "$version" ] || fail "Python reported '$out'"
[ "$(realpath "$(sed -n 2p <<<"$out")")" = "$(realpath "$lib")" ] || fail "Python loaded $(sed -n 2p <<<"$out"), not $lib"

step "pip install --no-build-isolation of python/"
if "$python" -m pip --version >/dev/null 2>&1 && "$python" -c 'import setuptools' 2>/dev/null; then
  cp -r "$MOESTREAM_SOURCE_DIR/python" "$scratch/python-src"
  rm -rf "$scratch/python-src/moestream/__pycache__"
  "$python" -m pip install --no-build-isolation --no-index --no-deps --disable-pip-version-check \
    --root-user-action=ignore --target "$scratch/pip" "$scratch/python-src" >"$log" 2>&1 || fail "pip install failed"
  out=$(cd "$scratch" && MOESTREAM_LIB=$lib PYTHONPATH="$scratch/pip" "$python" -c \
    'import moestream; print(moestream.version())') || fail "pip-installed package failed"
  [ "$out" = "$version" ] || fail "pip-installed package reported '$out'"
else
  echo "note: pip or setuptools missing; pip install not checked"
fi
echo "ok"
