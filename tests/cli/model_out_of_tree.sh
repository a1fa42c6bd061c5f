#!/usr/bin/env bash
# model_out_of_tree.sh — a real model family builds as a third party would build it:
# install this build into a temporary prefix, copy plugins/models/resnet (with the
# ConvNetBuilder helpers it compiles in, plugins/models/common) out of the source tree,
# configure it as its own CMake project against the installed SDK (find_package(CNNBench)),
# build it warnings-as-errors, and check the plugin: a shared object linked to the
# installed libcnnb, exporting nothing but cnnb_plugin_entry.
set -euo pipefail

: "${CNNB_SOURCE_DIR:?CNNB_SOURCE_DIR is not set}"
: "${CNNB_BUILD_DIR:?CNNB_BUILD_DIR is not set}"
family=resnet

fail() { echo "model_out_of_tree: $*" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"

if ! cmake --install "$CNNB_BUILD_DIR" --prefix "$prefix" >"$tmp/install.log" 2>&1; then
  cat "$tmp/install.log" >&2
  fail "cmake --install $CNNB_BUILD_DIR failed"
fi
config=$(find "$prefix" -name CNNBenchConfig.cmake -print -quit)
[[ -n "$config" ]] || fail "the install has no CNNBenchConfig.cmake (find_package(CNNBench) cannot work)"

# Out of the source tree: only the family, its shared helpers, and the installed SDK.
mkdir -p "$tmp/src"
cp -R "$CNNB_SOURCE_DIR/plugins/models/$family" "$CNNB_SOURCE_DIR/plugins/models/common" "$tmp/src/"

if ! cmake -S "$tmp/src/$family" -B "$tmp/build" -DCMAKE_PREFIX_PATH="$prefix" \
       -DCMAKE_BUILD_TYPE=RelWithDebInfo \
       -DCMAKE_C_FLAGS="-Wall -Wextra -Wshadow -Wno-unused-parameter -Werror" \
       >"$tmp/configure.log" 2>&1; then
  cat "$tmp/configure.log" >&2
  fail "configuring plugins/models/$family against the installed SDK failed"
fi
if ! cmake --build "$tmp/build" >"$tmp/build.log" 2>&1; then
  cat "$tmp/build.log" >&2
  fail "building plugins/models/$family out of tree failed"
fi

so="$tmp/build/libcnnb_model_$family.so"
[[ -f "$so" ]] || fail "no $so after the build (got: $(ls "$tmp/build"))"
readelf -h "$so" | grep -q 'Type:.*DYN' || fail "$so is not an ELF shared object"

exports=$(nm -D --defined-only "$so" | awk '{print $NF}' | sort -u)
[[ "$exports" == "cnnb_plugin_entry" ]] \
  || fail "$so must export only cnnb_plugin_entry; it exports: $(echo $exports)"

# Linked against the SDK library it was built for, not against the build tree's.
readelf -d "$so" | grep -q 'NEEDED.*libcnnb\.so' || fail "$so does not link libcnnb"
if readelf -d "$so" | grep -E 'R(UN)?PATH' | grep -qF "$CNNB_BUILD_DIR"; then
  fail "$so points into the build tree $CNNB_BUILD_DIR"
fi

echo "model_out_of_tree: plugins/models/$family built against $prefix: $(basename "$so") exports only cnnb_plugin_entry"
