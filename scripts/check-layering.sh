#!/usr/bin/env bash
# check-layering.sh [--objects=BUILD_DIR] [CORE_SRC [ARCHITECTURE_MD]] — the core's rooms
# keep their order, and no two files of one target need each other.
#
# core/src/ is one folder per concern ("room"); docs/architecture.md's table "Rooms"
# lists them lowest first, and that table is the rule this script reads (one place for
# the fact). A core file:
#  - lives in a room (no file directly in core/src/, no folder the table does not name);
#  - includes core headers by their room path ("exec/executor.h"), never by a bare name;
#  - includes only headers of its own room or of rooms listed before it;
# and no include cycle joins two modules, in one room or across rooms. A module is a .c
# file and the .h of the same name; a module's private header shared by its files
# (loader_impl.h, flags_internal.h) counts as the module's own.
#
# With --objects=BUILD_DIR (a built CMake tree) it also reads the calls: in every target
# of core/ and plugins/, each object's undefined symbols against the strong global
# symbols its sibling objects define (nm), and no circle of files that need each other's
# symbols may remain (a circle means the files are one module cut in two, or that two
# modules lean on each other: move what both need into a file of its own). Weak symbols
# (C++ inline functions, templates) are defined everywhere and do not count.
#
# Each violation is printed as FILE: what is wrong; the exit status is 1 when there is
# any (0 otherwise, 2 for bad arguments).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
objects=""
if [[ ${1:-} == --objects=* ]]; then
  objects=${1#--objects=}
  shift
  [ -d "$objects/CMakeFiles" ] || { echo "check-layering: $objects is not a CMake build tree" >&2; exit 2; }
  command -v nm >/dev/null || { echo "check-layering: --objects needs nm (binutils)" >&2; exit 2; }
fi
src=${1:-$here/core/src}
doc=${2:-$here/docs/architecture.md}
[ -d "$src" ] || { echo "check-layering: no directory $src" >&2; exit 2; }
[ -f "$doc" ] || { echo "check-layering: no file $doc" >&2; exit 2; }

# The rooms, lowest first: the first column of the table under "## Rooms", `name/`.
mapfile -t rooms < <(awk '
  /^## / { in_rooms = ($0 ~ /^## Rooms/) ; next }
  in_rooms && /^\| *`[a-z_]+\/`/ { sub(/^\| *`/, ""); sub(/\/`.*/, ""); print }' "$doc")
((${#rooms[@]})) || { echo "check-layering: $doc has no rooms table under '## Rooms'" >&2; exit 2; }
declare -A rank
for i in "${!rooms[@]}"; do rank[${rooms[$i]}]=$i; done

problems=0
problem() { echo "$1"; problems=$((problems + 1)); }
for dir in "$src"/*/; do
  room=$(basename "$dir")
  [ -n "${rank[$room]+x}" ] || problem "core/src/$room/: a folder the rooms table of $doc does not name"
done

module_of() { local m=${1%.*}; m=${m%_impl}; echo "${m%_internal}"; }
edges=$(mktemp)
trap 'rm -f "$edges"' EXIT
while IFS= read -r -d '' file; do
  rel=${file#"$src"/}
  if [[ $rel != */* ]]; then
    problem "core/src/$rel: not in a room (move it into the folder of its concern)"
    continue
  fi
  room=${rel%%/*}
  [ -n "${rank[$room]+x}" ] || continue # reported above
  module=$(module_of "$rel")
  while IFS= read -r included; do
    if [[ $included != */* ]]; then
      problem "core/src/$rel: includes \"$included\": name a core header by its room (\"room/$included\")"
      continue
    fi
    to=${included%%/*}
    if [ -z "${rank[$to]+x}" ]; then
      problem "core/src/$rel: includes \"$included\": '$to' is not a room"
    elif ((rank[$to] > rank[$room])); then
      problem "core/src/$rel: includes \"$included\": room $to is above room $room"
    fi
    to_module=$(module_of "$included")
    [ "$to_module" = "$module" ] || echo "$module $to_module" >> "$edges"
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file")
done < <(find "$src" -type f \( -name '*.c' -o -name '*.h' \) -print0 | sort -z)

# tsort names the modules of a cycle on stderr ("input contains a loop").
# tsort names the modules of each cycle it finds on stderr, after "input contains a loop:".
while IFS= read -r cycle; do
  problem "include cycle among core modules: $cycle"
done < <(tsort "$edges" 2>&1 >/dev/null | awk '
  /input contains a loop/ { if (c != "") print c; c = ""; next }
  { sub(/^tsort: /, ""); c = c (c == "" ? "" : " -> ") $0 }
  END { if (c != "") print c }')
# ---- calls between the objects of one target (--objects) ----------------------------

# The objects a target builds now, as its DependInfo.cmake lists them (an object of a
# source since removed may linger in the tree), relative to the build tree.
target_objects() {
  sed -n 's/^ *"[^"]*" "\([^"]*\.o\)" .*/\1/p' "$1/DependInfo.cmake" 2>/dev/null | sort -u
}
# One line per call from an object to a sibling: "FROM TO SYMBOL", objects named by their
# source path inside the target ("src/graph/graph.c").
target_calls() {
  local tdir=$1 o
  local defs
  defs=$(for o in "${@:2}"; do
    nm -g --defined-only "$objects/$o" | awk -v f="$o" '$2 ~ /^[TDBRGS]$/ {print $3, f}'
  done | sort -k1,1)
  for o in "${@:2}"; do
    nm -u "$objects/$o" | awk '{print $NF}' | sort -u | join - <(echo "$defs") |
      awk -v f="$o" '$2 != f {print f, $2, $1}'
  done | sed "s|$tdir/||g; s|\.o\b||g"
}
calls_checked=0
if [ -n "$objects" ]; then
  while IFS= read -r -d '' tdir; do
    tdir=${tdir#"$objects"/}
    mapfile -t objs < <(target_objects "$objects/$tdir")
    ((${#objs[@]} > 1)) || continue
    calls_checked=$((calls_checked + 1))
    target=$(basename "$tdir" .dir)
    calls=$(target_calls "$tdir" "${objs[@]}")
    [ -n "$calls" ] || continue
    while IFS= read -r members; do
      # The calls among the circle's files, each with up to three of its symbols.
      detail=$(awk -v m=" $members " 'index(m, " " $1 " ") && index(m, " " $2 " ") {
                 k = $1 " needs " $2; if (n[k]++ < 3) s[k] = s[k] (s[k] ? ", " : "") $3 }
               END { for (k in s) print k " (" s[k] ")" }' <<<"$calls" | sort | paste -sd ';' | sed 's/;/; /g')
      problem "call circle in target $target: ${members// / <-> }: $detail"
    done < <(awk '{print $1, $2}' <<<"$calls" | sort -u | tsort 2>&1 >/dev/null | awk '
      /input contains a loop/ { if (c != "") print c; c = ""; next }
      { sub(/^tsort: /, ""); c = c (c == "" ? "" : " ") $0 }
      END { if (c != "") print c }')
  done < <(find "$objects/core" "$objects/plugins" -path '*/CMakeFiles/*.dir' -type d -print0 2>/dev/null | sort -z)
fi

if ((problems)); then
  echo "check-layering: $problems problem(s); the rooms, lowest first: ${rooms[*]} ($doc)"
  exit 1
fi
echo "check-layering: $(find "$src" -type f \( -name '*.c' -o -name '*.h' \) | wc -l) files in ${#rooms[@]} rooms, every include goes down or stays in its room, no cycle"
[ -z "$objects" ] || echo "check-layering: $calls_checked targets of $objects, no two files need each other"
