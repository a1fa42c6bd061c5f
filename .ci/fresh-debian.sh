#!/usr/bin/env bash
# .ci/fresh-debian.sh — a fresh Debian 12 passes the README, and optional components stay
# optional. Run as root (CI runs it from .ci/run; it also runs alone). Needs network access
# to the Debian mirror this machine's apt uses, and about 3 GiB under /var/tmp.
#
#  1. Builds a minimal Debian 12 root (debootstrap --variant=minbase bookworm) from the
#     mirror in this machine's apt sources (sources.list one-line format or deb822 .sources;
#     FRESH_DEBIAN_MIRROR=URL overrides), in a mktemp -d directory under /var/tmp.
#  2. Optional components, in a copy of that root: with only what the core requires
#     installed — build-essential, cmake, and jansson through pkg-config (checkpoints, the
#     benchmark log and traces are JSON) — and the host's CUDA toolkit, when there is one,
#     bind-mounted read-only,
#     configure prints "cnnbench component X: off (why)" for each missing component, the
#     build succeeds and `cnnbench --version` runs. Then libdnnl-dev without the OpenCL
#     headers: ONEDNN is off and says why and how to fix it; after that fix it is on.
#  3. The README: in the untouched minimal root, every command of the ```sh block under
#     "## Set up" in README.md, read now (so the README and CI cannot drift), run as the
#     README says, in a clean `git clone` of this checkout's HEAD.
# Everything it mounts is unmounted on exit, also on failure, and the directory removed.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
suite=bookworm   # Debian 12, what the README promises
chroot_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

t_script=$SECONDS
say() { echo "== [fresh-debian] $*"; }
fail() {
  echo "== [fresh-debian] FAILED: $*" >&2
  exit 1
}
dur() { # seconds -> "XmYYs"
  printf '%dm%02ds' $(($1 / 60)) $(($1 % 60))
}
timings=()
step_name="" step_start=0
step() { # step NAME: ends the previous step (printing its duration), starts NAME
  step_end
  step_name=$1 step_start=$SECONDS
  echo
  say "---- $step_name"
}
step_end() {
  [ -n "$step_name" ] || return 0
  local took=$((SECONDS - step_start))
  say "---- $step_name: done in $(dur "$took")"
  timings+=("$(printf '%8s  %s' "$(dur "$took")" "$step_name")")
  step_name=""
}

[ "$(id -u)" -eq 0 ] || fail "must run as root (debootstrap, chroot and mount need it)"

# ---- the README's set-up commands ----------------------------------------------------------
# The lines of the first ```sh block after the "## Set up" heading (up to the next "## "),
# blank and comment lines skipped, backslash continuations joined.
readme_commands() {
  awk '
    inblock && /^```/ { exit }
    inblock {
      line = $0
      if (line ~ /^[ \t]*(#|$)/ && cont == "") next
      if (line ~ /\\$/) { cont = cont substr(line, 1, length(line) - 1); next }
      print cont line; cont = ""; next
    }
    /^## / { insec = ($0 ~ /^## Set up[ \t]*$/); next }
    insec && /^```(sh|bash|console|shell)?[ \t]*$/ { inblock = 1 }
  ' "$repo/README.md"
}
grep -q '^## Set up[[:space:]]*$' "$repo/README.md" ||
  fail "README.md has no '## Set up' heading: cannot read the set-up commands to test"
mapfile -t readme_cmds < <(readme_commands)
((${#readme_cmds[@]})) ||
  fail "README.md's '## Set up' section has no \`\`\`sh block with commands: nothing to test"
say "the README's set-up commands (from README.md, '## Set up'):"
for c in "${readme_cmds[@]}"; do echo "     $c"; done

# ---- the mirror, from this machine's apt sources ---------------------------------------------
# The first enabled "deb" source for $suite: one-line entries (sources.list, *.list), then
# deb822 stanzas (*.sources). Prints its first URI.
mirror_from_list() { # FILE
  awk -v s="$suite" '
    { sub(/#.*/, "") }
    $1 == "deb" {
      i = 2
      if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
      if ($(i + 1) == s) { print $i; exit }
    }' "$1"
}
mirror_from_sources() { # FILE (deb822)
  awk -v s="$suite" '
    function reset() { types = ""; uris = ""; suites = ""; enabled = "yes"; last = "" }
    function flush() {
      if ((" " types " ") ~ / deb / && enabled != "no" && (" " suites " ") ~ (" " s " ")) {
        split(uris, u, " ")
        if (u[1] != "") { print u[1]; found = 1; exit }
      }
      reset()
    }
    BEGIN { reset() }
    /^#/ { next }
    /^[ \t]*$/ { flush(); next }
    /^[ \t]/ {
      if (last == "types") types = types " " $0
      else if (last == "uris") uris = uris " " $0
      else if (last == "suites") suites = suites " " $0
      next
    }
    {
      key = tolower(substr($0, 1, index($0, ":") - 1)); val = substr($0, index($0, ":") + 1)
      last = key
      if (key == "types") types = val
      else if (key == "uris") uris = val
      else if (key == "suites") suites = val
      else if (key == "enabled") { enabled = tolower(val); gsub(/[ \t]/, "", enabled) }
    }
    END { if (!found) flush() }' "$1" | tr -s ' \t' '  '
}
host_mirror() {
  local f m
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    m=$(mirror_from_list "$f")
    [ -z "$m" ] || { echo "$m"; return 0; }
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    m=$(mirror_from_sources "$f")
    [ -z "$m" ] || { echo "$m"; return 0; }
  done
}
mirror=${FRESH_DEBIAN_MIRROR:-$(host_mirror)}
mirror=${mirror//[[:space:]]/}
[ -n "$mirror" ] || fail "no 'deb' source for $suite in /etc/apt/sources.list or \
/etc/apt/sources.list.d/*.{list,sources}; set FRESH_DEBIAN_MIRROR=URL"
say "mirror: $mirror ($suite)"

# ---- the work directory, its mounts, and their cleanup ----------------------------------------
work=$(mktemp -d /var/tmp/cnnbench-fresh.XXXXXX)
say "work directory: $work"

# Mount points under DIR, deepest first (mountinfo field 5; our paths have no spaces).
mounts_under() { awk -v d="$1/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r; }
# Kills what still runs chrooted under DIR (only the commands this script started run there).
kill_in() {
  local p r
  for p in /proc/[0-9]*; do
    r=$(readlink "$p/root" 2>/dev/null) || continue
    case "$r/" in "$1"/*) kill -KILL "${p#/proc/}" 2>/dev/null || true ;; esac
  done
}
unmount_under() { # DIR: unmounts everything under it, deepest first; lazily as a last resort
  local m
  kill_in "$1"
  for m in $(mounts_under "$1"); do
    umount "$m" 2>/dev/null || umount -R "$m" 2>/dev/null || umount -l "$m" ||
      echo "== [fresh-debian] could not unmount $m" >&2
  done
  [ -z "$(mounts_under "$1")" ]
}
remove_tree() { # DIR: removed only when nothing is mounted under it any more
  if unmount_under "$1"; then
    rm -rf --one-file-system "$1"
  else
    echo "== [fresh-debian] still mounted under $1, NOT removing it:" >&2
    mounts_under "$1" >&2
    return 1
  fi
}
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ -n "$step_name" ] && [ "$rc" -ne 0 ]; then
    echo "== [fresh-debian] FAILED in step: $step_name (after $(dur $((SECONDS - step_start))))" >&2
  fi
  local t=$SECONDS
  if remove_tree "$work"; then
    say "unmounted and removed $work in $(dur $((SECONDS - t)))"
  else
    rc=1
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# mnt TARGET MOUNT-ARGS...: mounts; bind mounts of the host's trees become slaves, so
# nothing mounted or unmounted under them in the root reaches the host.
mnt() {
  local target=$1
  shift
  mkdir -p "$target"
  mount "$@" "$target" || fail "mount $* $target"
  case " $* " in *" --bind "*) mount --make-rslave "$target" ;; esac
}
enter() { # enter ROOT: proc, sys, dev, dev/pts (and a private dev/shm), resolv.conf
  local root=$1
  cp -L /etc/resolv.conf "$root/etc/resolv.conf"
  # Services must not start inside the root (invoke-rc.d asks this).
  printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
  chmod 755 "$root/usr/sbin/policy-rc.d"
  mnt "$root/proc" -t proc proc
  mnt "$root/sys" -t sysfs -o ro sysfs
  mnt "$root/dev" --bind /dev
  mnt "$root/dev/pts" --bind /dev/pts
  mnt "$root/dev/shm" -t tmpfs -o mode=1777,nosuid,nodev tmpfs
}
# in_root ROOT SCRIPT: runs SCRIPT with bash -c in ROOT, with a clean environment (nothing
# of this host's, such as PATH with CUDA in it, leaks into the test).
in_root() {
  chroot "$1" /usr/bin/env -i HOME=/root PATH="$chroot_path" LANG=C.UTF-8 TERM=dumb \
    /bin/bash -c "$2"
}
clone_into() { # ROOT: a clean clone of this checkout's HEAD at ROOT/root/cnnbench
  local head
  head=$(git -C "$repo" rev-parse HEAD)
  [ -z "$(git -C "$repo" status --porcelain --untracked-files=no)" ] ||
    say "note: $repo has uncommitted changes; the fresh root tests the commit $head only"
  git clone -q --no-hardlinks "$repo" "$1/root/cnnbench" || fail "git clone $repo"
  git -C "$1/root/cnnbench" checkout -q --detach "$head" || fail "checkout $head in the clone"
  say "cloned $repo at $(git -C "$repo" log -1 --format='%h %s' | cut -c1-100)"
}
apt_in() { # apt_in ROOT PACKAGE...: apt-get install without recommends, as install-deps does
  local root=$1
  shift
  in_root "$root" "set -e; export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends $* >/tmp/apt.log 2>&1 || { tail -n 40 /tmp/apt.log; exit 1; }" ||
    fail "apt-get install $* in $root"
}

# ---- 1. the minimal root ---------------------------------------------------------------------
step "debootstrap --variant=minbase $suite"
if ! command -v debootstrap >/dev/null; then
  say "installing debootstrap (apt-get)"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq || fail "apt-get update (to install debootstrap)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap \
    >/dev/null || fail "apt-get install debootstrap"
fi
base="$work/minbase"
if ! debootstrap --variant=minbase "$suite" "$base" "$mirror" >"$work/debootstrap.log" 2>&1; then
  tail -n 30 "$work/debootstrap.log" >&2
  [ ! -f "$base/debootstrap/debootstrap.log" ] || tail -n 30 "$base/debootstrap/debootstrap.log" >&2
  fail "debootstrap --variant=minbase $suite $base $mirror"
fi
say "minimal root: $(du -sh --one-file-system "$base" | cut -f1), $(chroot "$base" dpkg-query -W | wc -l) packages"
# The README stage uses $base itself; the optional-components stage works in a copy, so
# what it installs never helps the README's commands.
cp -a "$base" "$work/optional"

# ---- 2. optional components stay optional ------------------------------------------------------
step "optional components: only build-essential + cmake + jansson (and the host's CUDA toolkit)"
root="$work/optional"
enter "$root"
clone_into "$root"
apt_in "$root" build-essential cmake pkg-config libjansson-dev
expect_off=(ONEDNN CHECK JPEG MPI)
expect_on=()
cuda=""
if [ -d /usr/local/cuda/bin ]; then
  cuda=$(readlink -f /usr/local/cuda)
  mnt "$root/usr/local/cuda" --bind "$cuda"
  mount -o remount,bind,ro "$root/usr/local/cuda" || fail "remount $root/usr/local/cuda read-only"
  say "the host's CUDA toolkit ($cuda) mounted read-only at /usr/local/cuda"
  expect_on+=(CUDA)
else
  say "this host has no /usr/local/cuda: CUDA is expected off too"
  expect_off+=(CUDA)
fi

# check_components LOG: the component lines against expect_on / expect_off
check_components() {
  local log=$1 c line n
  for c in "${expect_off[@]}"; do
    n=$(grep -c "cnnbench component $c: " "$log") || true
    [ "$n" -eq 1 ] || fail "configure printed $n 'cnnbench component $c:' lines, expected one"
    line=$(grep "cnnbench component $c: " "$log")
    grep -qE "^-- cnnbench component $c: off \(.+\)$" <<<"$line" ||
      fail "component $c should be 'off (why)': $line"
    echo "     ok: $line"
  done
  for c in "${expect_on[@]}"; do
    grep -q "cnnbench component $c: on$" "$log" ||
      fail "component $c should be on: $(grep "cnnbench component $c:" "$log" || echo 'no line')"
    echo "     ok: $(grep "cnnbench component $c: " "$log")"
  done
}
in_root "$root" "cd /root/cnnbench && cmake -S . -B build-off" >"$work/off-configure.log" 2>&1 || {
  cat "$work/off-configure.log"
  fail "configure with every optional component missing (cmake -S . -B build-off)"
}
grep '^-- cnnbench component' "$work/off-configure.log" | sed 's/^/     /'
check_components "$work/off-configure.log"
in_root "$root" "cd /root/cnnbench && cmake --build build-off -j$(nproc)" >"$work/off-build.log" 2>&1 || {
  tail -n 60 "$work/off-build.log"
  fail "build with every optional component missing (cmake --build build-off)"
}
in_root "$root" "cd /root/cnnbench && build-off/bin/cnnbench --version" ||
  fail "build-off/bin/cnnbench --version"
say "configured, built, and cnnbench --version ran with ${expect_off[*]} off"

step "optional components: libdnnl-dev without the OpenCL headers, then with them"
apt_in "$root" libdnnl-dev
in_root "$root" "cd /root/cnnbench && rm -rf build-off && cmake -S . -B build-mid" >"$work/mid-configure.log" 2>&1 || {
  cat "$work/mid-configure.log"
  fail "configure with libdnnl-dev but no OpenCL headers (cmake -S . -B build-mid)"
}
expected="cnnbench component ONEDNN: off (oneDNN's CMake package needs the OpenCL headers: apt-get install ocl-icd-opencl-dev)"
grep -qF -- "$expected" "$work/mid-configure.log" ||
  fail "with libdnnl-dev but no OpenCL headers, expected '$expected'; got: $(grep 'component ONEDNN' "$work/mid-configure.log" || echo 'no ONEDNN line')"
echo "     ok: $expected"
# The fix the message names works, on the same build directory (no stale cache).
apt_in "$root" ocl-icd-opencl-dev
in_root "$root" "cd /root/cnnbench && cmake -S . -B build-mid" >"$work/fixed-configure.log" 2>&1 || {
  cat "$work/fixed-configure.log"
  fail "configure after apt-get install ocl-icd-opencl-dev"
}
grep -q "cnnbench component ONEDNN: on$" "$work/fixed-configure.log" ||
  fail "after apt-get install ocl-icd-opencl-dev ONEDNN is still not on: $(grep 'component ONEDNN' "$work/fixed-configure.log")"
echo "     ok: after apt-get install ocl-icd-opencl-dev: cnnbench component ONEDNN: on"
in_root "$root" "rm -rf /root/cnnbench/build-mid"
remove_tree "$root" || fail "removing $root"

# ---- 3. the README, in the untouched minimal root ---------------------------------------------
root="$base"
enter "$root"
clone_into "$root"
i=0
for c in "${readme_cmds[@]}"; do
  i=$((i + 1))
  step "README set-up command $i of ${#readme_cmds[@]}: $c"
  in_root "$root" "cd /root/cnnbench && $c" ||
    fail "README set-up command $i failed in a fresh Debian 12 root: $c"
done
step_end

echo
say "all passed in $(dur $((SECONDS - t_script))):"
printf '     %s\n' "${timings[@]}"
