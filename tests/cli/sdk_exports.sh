#!/usr/bin/env bash
# The SDK is the only surface, at link time too:
#  - libcnnb's dynamic symbols are exactly the functions sdk/include/cnnb/*.h declares
#    CNNB_EXPORT (no executor, planner, trainer, loader or flag-table internals);
#  - its soname follows the plugin ABI's major version (libcnnb.so.<CNNB_ABI_MAJOR>);
#  - every built plugin exports only cnnb_plugin_entry, and every cnnb_* symbol it
#    needs is one libcnnb exports (they link -z defs against the SDK only);
#  - a plugin's private library in a subdirectory of the plugin folder (the loader does
#    not scan those: the cuda device's cuda/libcnnb_cuda_impl.so, the strategies'
#    nccl/libcnnb_nccl_impl.so) exports only its one cnnb_*_entry, under the same rule for
#    what it needs.
set -euo pipefail
: "${CNNB_SOURCE_DIR:?}" "${CNNB_BUILD_DIR:?}" "${CNNB_PLUGIN_DIR:?}"
command -v nm >/dev/null && command -v readelf >/dev/null || { echo "SKIP: needs nm and readelf (binutils)"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

major=$(sed -n 's/^#define CNNB_ABI_MAJOR \([0-9]*\).*/\1/p' "$CNNB_SOURCE_DIR/sdk/include/cnnb/abi.h")
[ -n "$major" ] || fail "cannot read CNNB_ABI_MAJOR from abi.h"
lib="$CNNB_BUILD_DIR/lib/libcnnb.so.$major"
[ -f "$lib" ] || fail "no $lib: the library is not named after ABI major $major"
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "libcnnb.so.$major" ] || fail "soname is '$soname', want libcnnb.so.$major"

# Declarations: the identifier before the first '(' after each CNNB_EXPORT, skipping the
# #define lines that merely use the macro (CNNB_PLUGIN_ENTRY).
awk '
  /^[ \t]*#/ { in_macro = /\\$/; next }
  in_macro { in_macro = /\\$/; next }
  /CNNB_EXPORT/ { text = ""; collecting = 1 }
  collecting { text = text " " $0
               if (index(text, "(")) {
                 sub(/\(.*/, "", text); n = split(text, w, /[ \t*]+/); print w[n]; collecting = 0 } }
' "$CNNB_SOURCE_DIR"/sdk/include/cnnb/*.h | sort -u > "$tmp/declared"
[ "$(wc -l < "$tmp/declared")" -gt 20 ] || fail "found only $(wc -l < "$tmp/declared") SDK declarations: the header scan is broken"
grep -qx cnnb_conv2d "$tmp/declared" || fail "header scan missed cnnb_conv2d"

nm -D --defined-only "$lib" | awk '{print $NF}' | sort -u > "$tmp/exported"
if ! diff -u "$tmp/declared" "$tmp/exported" > "$tmp/diff"; then
  echo "libcnnb's exports differ from the SDK's declarations (- declared only, + exported only):"
  grep '^[-+]cnnb\|^[-+][^-+]' "$tmp/diff" || true
  fail "exported symbols != sdk/include/cnnb declarations"
fi

plugins=0 private=0
while IFS= read -r -d '' so; do
  exports=$(nm -D --defined-only "$so" | awk '{print $NF}' | grep -v '^_\(init\|fini\)$' || true)
  if [ "$(dirname "$so")" = "${CNNB_PLUGIN_DIR%/}" ]; then
    plugins=$((plugins + 1))
    [ "$exports" = cnnb_plugin_entry ] || fail "$so exports more than cnnb_plugin_entry: $(echo $exports)"
  else
    private=$((private + 1))
    grep -qx 'cnnb_[a-z0-9_]*_entry' <<<"$exports" && [ "$(wc -w <<<"$exports")" -eq 1 ] ||
      fail "$so (a plugin's private library) exports more than its one cnnb_*_entry: $(echo $exports)"
  fi
  # (a library may need no cnnb_* symbol at all: nccl/libcnnb_nccl_impl.so)
  nm -D --undefined-only "$so" | awk '{print $NF}' | sed 's/@.*//' | { grep '^cnnb_' || true; } |
    sort -u > "$tmp/needs"
  extra=$(comm -23 "$tmp/needs" "$tmp/exported")
  [ -z "$extra" ] || fail "$so needs cnnb_* symbols libcnnb does not export: $extra"
done < <(find "$CNNB_PLUGIN_DIR" -name '*.so' -print0)
[ "$plugins" -gt 0 ] || fail "no plugins under $CNNB_PLUGIN_DIR"
echo "ok: libcnnb.so.$major exports exactly the $(wc -l < "$tmp/declared") SDK functions; $plugins plugins export only their entry, $private private libraries only theirs"
