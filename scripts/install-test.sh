#!/usr/bin/env bash
# Proves that an installed wgsl-forge works without the source tree: builds the library and the
# tool (Release, no tests), installs them into a temporary prefix, copies that prefix elsewhere and
# deletes the original (so no path the build knows points into the installation), then, from the
# copy and with WGSL_FORGE_WEBGPU_LIB unset:
#   - checks the layout, the SONAME (libwgsl_forge.so.0) and the pkg-config file;
#   - runs `wgsl-forge --version`, `wgsl-forge adapters`, and `adapters --json`, whose
#     library_path must be the Dawn inside the prefix;
#   - builds examples/consumer with find_package (CMAKE_PREFIX_PATH), and the same example with
#     `c++ $(pkg-config --cflags --libs wgsl_forge)`, checks each NEEDs libwgsl_forge.so.0 and
#     runs it on the default adapter (lavapipe here), checking that it loaded the prefix's Dawn.
#
#   scripts/install-test.sh        needs what scripts/setup.sh installs (Dawn in node_modules)
#
# The build stays in build/install-test, so a second run only rebuilds what changed; a configured
# build named by $WGSL_FORGE_INSTALL_TEST_BUILD (CI: build/ci) is installed as it is, which saves
# CI a second build. Everything else is in a temporary directory removed at exit.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${WGSL_FORGE_INSTALL_TEST_BUILD:-$repo_root/build/install-test}"
jobs="${WGSL_FORGE_JOBS:-2}"

log() { printf '[install-test] %s\n' "$*" >&2; }
fail() { printf '[install-test] FAILED: %s\n' "$*" >&2; exit 1; }

work="$(realpath "$(mktemp -d)")"
trap 'rm -rf "$work"' EXIT
unset WGSL_FORGE_WEBGPU_LIB
export WGSL_FORGE_CACHE="$work/cache"
started=$SECONDS

if [ -f "$build_dir/CMakeCache.txt" ] && [ -n "${WGSL_FORGE_INSTALL_TEST_BUILD:-}" ]; then
  # A build that is already configured (CI passes the ci preset's): installed as it is.
  log "building $build_dir as configured (-j$jobs)"
else
  log "configuring and building $build_dir (Release, no tests, -j$jobs)"
  cmake -S "$repo_root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DWGSL_FORGE_BUILD_TESTS=OFF >"$work/configure.log" 2>&1 ||
    { cat "$work/configure.log" >&2; fail "configuring $build_dir"; }
fi
cmake --build "$build_dir" -j "$jobs" --target wgsl_forge_shared wgsl-forge ||
  fail "building the library and the tool"

log "installing, then moving the installation"
cmake --install "$build_dir" --prefix "$work/installed" >"$work/install.log" 2>&1 ||
  { cat "$work/install.log" >&2; fail "cmake --install"; }
prefix="$work/prefix"
cp -a "$work/installed" "$prefix"
rm -rf "$work/installed"

for file in include/wgsl_forge/gpu.hpp include/wgsl_forge/version.hpp lib/libwgsl_forge.so.0 \
  lib/libwgsl_forge_util.a lib/wgsl_forge/libwebgpu_wrapper.so \
  lib/cmake/wgsl_forge/wgsl_forgeConfig.cmake lib/cmake/wgsl_forge/wgsl_forgeConfigVersion.cmake \
  lib/pkgconfig/wgsl_forge.pc bin/wgsl-forge; do
  [ -e "$prefix/$file" ] || fail "the installation has no $file"
done
readelf -d "$prefix/lib/libwgsl_forge.so" | grep -q 'Library soname: \[libwgsl_forge.so.0\]' ||
  fail "lib/libwgsl_forge.so has no SONAME libwgsl_forge.so.0"

tool="$prefix/bin/wgsl-forge"
version="$(sed -n 's/^project(wgsl_forge VERSION \([0-9.]*\).*/\1/p' "$repo_root/CMakeLists.txt")"
"$tool" --version | grep -qF "$version" || fail "wgsl-forge --version does not say $version"
"$tool" adapters >"$work/adapters.txt" || { cat "$work/adapters.txt" >&2; fail "wgsl-forge adapters"; }
"$tool" adapters --json >"$work/adapters.json" || fail "wgsl-forge adapters --json"
grep -qF "\"library_path\": \"$prefix/lib/wgsl_forge/libwebgpu_wrapper.so\"" "$work/adapters.json" ||
  fail "the installed tool did not load the prefix's Dawn: $(grep library_path "$work/adapters.json")"
log "$("$tool" --version) runs from the moved prefix on $(sed -n 's/^ *"name": "\(.*\)",$/\1/p' "$work/adapters.json" | head -n 1) with its Dawn"

# Runs an example program built against the installation; it must NEED libwgsl_forge.so.0, pass,
# and load the Dawn inside the prefix (the loader's trace names each file it opens).
run_example() {
  local program="$1" name
  name="$(basename "$(dirname "$program")")-$(basename "$program")"
  readelf -d "$program" | grep -q 'Shared library: \[libwgsl_forge.so.0\]' ||
    fail "$program does not NEED libwgsl_forge.so.0"
  LD_DEBUG=files LD_DEBUG_OUTPUT="$work/ld-$name" "$program" --cache "$work/cache" --rows 100003 \
    >"$work/$name.out" 2>&1 || { cat "$work/$name.out" >&2; fail "$program failed"; }
  cat "$work"/ld-"$name".* | grep -qF "file=$prefix/lib/wgsl_forge/libwebgpu_wrapper.so " ||
    fail "$name did not load the prefix's Dawn"
  log "$name (prefix's Dawn): $(tail -n 1 "$work/$name.out")"
}

log "building examples/consumer with find_package(wgsl_forge)"
cmake -S "$repo_root/examples/consumer" -B "$work/consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" >"$work/consumer.log" 2>&1 ||
  { cat "$work/consumer.log" >&2; fail "configuring examples/consumer"; }
cmake --build "$work/consumer" -j "$jobs" >"$work/consumer-build.log" 2>&1 ||
  { cat "$work/consumer-build.log" >&2; fail "building examples/consumer"; }
run_example "$work/consumer/database_startup"
run_example "$work/consumer/star_query"
if [ -f "$repo_root/examples/database_startup.c" ]; then
  run_example "$work/consumer/database_startup_c"
fi

log "building the examples with pkg-config"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
mkdir -p "$work/pkg-config"
# shellcheck disable=SC2046  # the flags are words
c++ -std=c++20 -O2 "$repo_root/examples/database_startup.cpp" -o "$work/pkg-config/database_startup" \
  $(pkg-config --cflags --libs wgsl_forge) -Wl,-rpath,"$prefix/lib" ||
  fail "c++ \$(pkg-config --cflags --libs wgsl_forge) examples/database_startup.cpp"
run_example "$work/pkg-config/database_startup"
if [ -f "$repo_root/examples/database_startup.c" ]; then
  # shellcheck disable=SC2046
  cc -std=c11 -O2 "$repo_root/examples/database_startup.c" -o "$work/pkg-config/database_startup_c" \
    $(pkg-config --cflags --libs wgsl_forge) -Wl,-rpath,"$prefix/lib" ||
    fail "cc \$(pkg-config --cflags --libs wgsl_forge) examples/database_startup.c"
  run_example "$work/pkg-config/database_startup_c"
fi

log "passed in $((SECONDS - started)) s"
