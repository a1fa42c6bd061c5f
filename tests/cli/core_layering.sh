#!/usr/bin/env bash
# The core's rooms keep their order (scripts/check-layering.sh, the rooms table of
# docs/architecture.md): the tree passes, and copies of it with one planted fault each
# fail, naming the fault — an include that goes up a room, a bare include, a circle of
# includes between two modules, a file outside any room; and in the build tree no two
# files of a target of core/ or plugins/ need each other's symbols, which a planted pair
# of objects calling each other shows the check would see.
set -euo pipefail
: "${CNNB_SOURCE_DIR:?}"
check="$CNNB_SOURCE_DIR/scripts/check-layering.sh"
doc="$CNNB_SOURCE_DIR/docs/architecture.md"
command -v tsort >/dev/null || { echo "SKIP: needs tsort (coreutils)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

command -v nm >/dev/null || { echo "SKIP: needs nm (binutils)"; exit 77; }
: "${CNNB_BUILD_DIR:?}"
out=$("$check" --objects="$CNNB_BUILD_DIR" "$CNNB_SOURCE_DIR/core/src" "$doc") ||
  fail "the tree itself: $out"
echo "$out"
grep -q "targets of $CNNB_BUILD_DIR, no two files need each other" <<<"$out" ||
  fail "the build tree's calls were not checked: $out"

# expect_fault NAME WANT: a fresh copy of core/src, changed by the function plant_NAME,
# must fail with a line containing WANT.
expect_fault() {
  local name=$1 want=$2 copy="$tmp/$1"
  cp -r "$CNNB_SOURCE_DIR/core/src" "$copy"
  "plant_$name" "$copy"
  local rc=0
  out=$("$check" "$copy" "$doc") || rc=$?
  [ "$rc" -eq 1 ] || fail "$name: exit $rc, want 1: $out"
  grep -qF -- "$want" <<<"$out" || fail "$name: no line with '$want' in: $out"
  echo "planted $name: refused ($(grep -F -- "$want" <<<"$out" | head -n 1))"
}

# The graph reaching up into a run's internals.
plant_upward() { sed -i '0,/^#include "/s//#include "run\/run.h"\n#include "/' "$1/graph/graph.c"; }
expect_fault upward 'core/src/graph/graph.c: includes "run/run.h": room run is above room graph'

plant_bare() { echo '#include "executor.h"' >> "$1/exec/trainer.c"; }
expect_fault bare 'core/src/exec/trainer.c: includes "executor.h": name a core header by its room'

# Two modules of one room that need each other: the setup/checkpoint circle of old.
plant_circle() {
  sed -i '0,/^#include "/s//#include "run\/setup.h"\n#include "/' "$1/run/checkpoint.h"
}
expect_fault circle 'include cycle among core modules:'

plant_outside() { echo '/* a file in no room */' > "$1/stray.c"; }
expect_fault outside 'core/src/stray.c: not in a room'

plant_unknown_room() { mkdir "$1/misc" && echo '/* a room the table lacks */' > "$1/misc/misc.c"; }
expect_fault unknown_room 'core/src/misc/: a folder the rooms table'
# A call circle: two objects of one plugin target that need each other's symbols (the
# ops.c <-> plan.c pair of old), in a build tree of their own; and a third object that
# only calls into them, which is no circle.
planted="$tmp/build-planted"
tdir=plugins/devices/planted/CMakeFiles/cnnb_device_planted.dir
mkdir -p "$planted/CMakeFiles" "$planted/$tdir"
echo 'int layout_plain(void); int op_find(int op) { return op + layout_plain(); }' > "$tmp/ops.c"
echo 'int op_find(int op); int layout_plain(void) { return 1; }
int plan(int op) { return op_find(op); }' > "$tmp/plan.c"
echo 'int plan(int op); int device_prepare(int op) { return plan(op); }' > "$tmp/device.c"
{
  echo 'set(CMAKE_DEPENDS_DEPENDENCY_FILES'
  for f in ops plan device; do
    "${CC:-cc}" -c -o "$planted/$tdir/$f.c.o" "$tmp/$f.c"
    echo "  \"$tmp/$f.c\" \"$tdir/$f.c.o\" \"gcc\" \"$tdir/$f.c.o.d\""
  done
  echo '  )'
} > "$planted/$tdir/DependInfo.cmake"
rc=0
out=$("$check" --objects="$planted" "$CNNB_SOURCE_DIR/core/src" "$doc") || rc=$?
[ "$rc" -eq 1 ] || fail "planted call circle: exit $rc, want 1: $out"
want='call circle in target cnnb_device_planted: '
line=$(grep -F -- "$want" <<<"$out") || fail "planted call circle: no line with '$want' in: $out"
for part in 'ops.c needs plan.c (layout_plain)' 'plan.c needs ops.c (op_find)'; do
  grep -qF -- "$part" <<<"$line" || fail "planted call circle: '$part' missing from: $line"
done
if grep -qF device.c <<<"$line"; then fail "planted call circle: device.c only calls in, yet: $line"; fi
echo "planted call circle: refused ($line)"
echo "PASS"
