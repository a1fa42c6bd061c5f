#!/usr/bin/env bash
# sdk_example.sh — the third-party path end to end: install this build into a temporary
# prefix, build sdk/examples against that install with find_package(CNNBench) (and
# nothing from the source tree), check the plugin exports exactly one symbol, and run it
# with the installed cnnbench for two steps.
set -u
: "${CNNB_BUILD_DIR:?run through ctest (CNNB_BUILD_DIR unset)}"
: "${CNNB_SOURCE_DIR:?run through ctest (CNNB_SOURCE_DIR unset)}"
command -v cmake >/dev/null || { echo "SKIP: cmake not on PATH"; exit 77; }
command -v nm >/dev/null || { echo "SKIP: nm (binutils) not on PATH"; exit 77; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"

die() {
  echo "FAIL: $*"
  exit 1
}

# Prints the file's log and fails.
die_log() { # LOG MESSAGE
  cat "$1"
  die "$2"
}

# A plugin's dynamic symbols: exactly the entry point, nothing else leaks.
check_one_symbol() { # FILE
  local symbols
  symbols="$(nm -D --defined-only "$1" | awk '{print $NF}' | sort -u)"
  [[ "$symbols" == "cnnb_plugin_entry" ]] ||
    die "$1 exports more (or other) than cnnb_plugin_entry:
$symbols"
}

# ---- install this build ------------------------------------------------------------------
cmake --install "$CNNB_BUILD_DIR" --prefix "$prefix" >"$tmp/install.log" 2>&1 ||
  die_log "$tmp/install.log" "cmake --install $CNNB_BUILD_DIR failed"
[[ -x "$prefix/bin/cnnbench" ]] || die "no bin/cnnbench in the install"
[[ -f "$prefix/include/cnnb/cnnb.h" ]] || die "no include/cnnb/cnnb.h in the install"
config="$(find "$prefix" -name CNNBenchConfig.cmake | head -n 1)"
[[ -n "$config" ]] || die "no CNNBenchConfig.cmake in the install"
plugin_dir="$(find "$prefix" -type d -path '*/cnnbench/plugins' | head -n 1)"
[[ -n "$plugin_dir" ]] || die "no lib/cnnbench/plugins in the install"
for so in "$plugin_dir"/*.so; do check_one_symbol "$so"; done

# ---- build the example against it, with the compiler this build used --------------------
cc="$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$CNNB_BUILD_DIR/CMakeCache.txt")"
cmake -S "$CNNB_SOURCE_DIR/sdk/examples" -B "$tmp/build" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
  ${cc:+-DCMAKE_C_COMPILER="$cc"} \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
  >"$tmp/configure.log" 2>&1 || die_log "$tmp/configure.log" "configuring the example failed"
found="$(sed -n 's/^CNNBench_DIR:[A-Z]*=//p' "$tmp/build/CMakeCache.txt")"
[[ "$found" == "$(dirname "$config")" ]] ||
  die "find_package(CNNBench) found '$found', not the install in $prefix"
cmake --build "$tmp/build" >"$tmp/build.log" 2>&1 ||
  die_log "$tmp/build.log" "building the example failed"
# Only the installed SDK: no include path into the source or build tree.
grep -qF -- "$prefix/include" "$tmp/build/compile_commands.json" ||
  die "the example was not compiled against $prefix/include"
if grep -E -- "-(I|isystem) ?($CNNB_SOURCE_DIR|$CNNB_BUILD_DIR)" \
     "$tmp/build/compile_commands.json"; then
  die "the example reached into the source or build tree"
fi
so="$tmp/build/libexample_convnet.so"
[[ -f "$so" ]] || die "no $so after building"
check_one_symbol "$so"

cmake --install "$tmp/build" --prefix "$tmp/example" >"$tmp/install_example.log" 2>&1 ||
  die_log "$tmp/install_example.log" "installing the example failed"
installed="$(find "$tmp/example" -name libexample_convnet.so | head -n 1)"
[[ -n "$installed" ]] || die "the example's install has no libexample_convnet.so"
check_one_symbol "$installed"

# ---- run it with the installed cnnbench --------------------------------------------------
"$prefix/bin/cnnbench" --plugin="$so" --model=example_convnet --num_batches=2 --batch_size=2 \
  >"$tmp/run.out" 2>"$tmp/run.err"
rc=$?
[[ $rc == 0 ]] || die "cnnbench --plugin=$so --model=example_convnet exited $rc:
$(cat "$tmp/run.out" "$tmp/run.err")"
grep -q '^total images/sec: ' "$tmp/run.out" ||
  die "no 'total images/sec:' line in:
$(cat "$tmp/run.out")"

# Dropped into a directory on CNNB_PLUGIN_PATH, it is found by name.
CNNB_PLUGIN_PATH="$(dirname "$installed")" "$prefix/bin/cnnbench" --list_plugins \
  >"$tmp/list.out" 2>&1 || die "cnnbench --list_plugins failed: $(cat "$tmp/list.out")"
grep -E "^ +model +example_convnet .*$installed" "$tmp/list.out" >/dev/null ||
  die "--list_plugins does not show the installed example:
$(cat "$tmp/list.out")"
echo "SDK example: built against $prefix, exports one symbol, ran two steps"
