#!/usr/bin/env bash
# Prepares .gpu-deps/: the build dependencies that the GPU machine's image lacks, for
# bench/gpu_check.sh to use there (it travels with the working tree as a `carry` path;
# bench/README.md, "GPU check", has the exact invocation).
#
# That machine (Ubuntu 24.04, no network) has CUDA, cuDNN, NCCL, OpenMPI and PyTorch, but
# no Check (without it the configure sets up no tests, so no `ctest -L gpu`), maybe no
# jansson (the core needs it) and maybe no pkg-config (how CMake finds both). So this
# script, run HERE (Debian 12, apt, root), downloads Debian 12's packages of the three and
# unpacks them with `dpkg -x` into .gpu-deps/root. Debian 12's binaries run there: they
# need glibc 2.36, and Ubuntu 24.04 has 2.39.
#
# What lands where (gpu_check.sh relies on these paths):
#   .gpu-deps/root/usr/bin/pkgconf                            pkg-config (PKG_CONFIG_EXECUTABLE)
#   .gpu-deps/root/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc    check, libsubunit, jansson
#   .gpu-deps/root/usr/lib/x86_64-linux-gnu/lib*.{a,so*}      libcheck_pic.a, libsubunit,
#                                                             libjansson, libpkgconf
#   .gpu-deps/MANIFEST                                        package versions and sha256s
# The .pc files' `prefix=/usr` becomes `prefix=${pcfiledir}/../../..` (pkgconf expands
# pcfiledir to the folder the .pc file is in), so the tree works wherever the checkout
# lies; gpu_check.sh sets PKG_CONFIG_LIBDIR to that pkgconfig folder alone, so nothing of
# the host's can be picked up instead.
#
# Usage: scripts/gpu-deps.sh        (from anywhere; rebuilds .gpu-deps/ from scratch)
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
dest="$repo/.gpu-deps"
root="$dest/root"
arch_lib="usr/lib/x86_64-linux-gnu"

# check: libcheck_pic.a, check.h, check.pc (Requires: libsubunit, so libsubunit-dev's .pc
#        and libsubunit.so, and libsubunit0's libsubunit.so.0 at run time);
# libjansson-dev + libjansson4: jansson.h, jansson.pc, libjansson.so(.4);
# pkgconf-bin + libpkgconf3: the pkgconf binary and its library (the `pkgconf` and
#        `pkg-config` packages hold only symlinks and personality files).
# libdnnl2 + libdnnl-dev: oneDNN, for the cpu device, which cli_gpu_matches_cpu trains
#        against the cuda device; its CMake package wants the OpenCL headers and loader
#        (ocl-icd-opencl-dev, ocl-icd-libopencl1, opencl-c-headers). 41 MB unpacked, most
#        of the carry (64 MiB with the working tree).
# libturbojpeg0(-dev) + libjpeg62-turbo(-dev): the imagenet datasource (1 MB).
packages=(check libsubunit-dev libsubunit0 libjansson-dev libjansson4 pkgconf-bin libpkgconf3
          libdnnl2 libdnnl-dev ocl-icd-libopencl1 ocl-icd-opencl-dev opencl-c-headers
          libturbojpeg0 libturbojpeg0-dev libjpeg62-turbo libjpeg62-turbo-dev)

[ "$(dpkg --print-architecture 2>/dev/null)" = amd64 ] ||
  { echo "gpu-deps.sh: needs a Debian amd64 machine (the GPU machine is x86-64)" >&2; exit 2; }
# shellcheck source=/dev/null
. /etc/os-release
[ "${VERSION_ID:-}" = 12 ] ||
  echo "gpu-deps.sh: warning: this is $PRETTY_NAME, not Debian 12; the GPU machine's glibc is 2.39, so its packages must need no newer" >&2

rm -rf "$dest"
mkdir -p "$dest/debs" "$root"
# apt-get download needs current package lists; refresh them only when it cannot find one.
if ! (cd "$dest/debs" && apt-get download "${packages[@]}" >/dev/null 2>&1); then
  apt-get update -qq
  (cd "$dest/debs" && apt-get download "${packages[@]}")
fi

{
  echo "# .gpu-deps: Debian $(cat /etc/debian_version) packages unpacked with dpkg -x by scripts/gpu-deps.sh on $(date -u '+%Y-%m-%d %H:%M UTC')"
  for deb in "$dest"/debs/*.deb; do
    dpkg -x "$deb" "$root"
    printf '%s %s %s\n' "$(dpkg-deb -f "$deb" Package)" "$(dpkg-deb -f "$deb" Version)" \
      "$(sha256sum "$deb" | cut -d' ' -f1)"
  done
} > "$dest/MANIFEST"
rm -rf "$dest/debs" "$root/usr/share/doc" "$root/usr/share/man" "$root/usr/share/info" \
       "$root/usr/share/lintian"

# Relocatable .pc files: prefix relative to the .pc file's own folder.
pcdir="$root/$arch_lib/pkgconfig"
for pc in "$pcdir"/*.pc; do
  grep -q '^prefix=/usr$' "$pc" ||
    { echo "gpu-deps.sh: $pc has no 'prefix=/usr' line to rewrite" >&2; exit 1; }
  # shellcheck disable=SC2016  # ${pcfiledir} is pkgconf's to expand, not the shell's
  sed -i 's|^prefix=/usr$|prefix=${pcfiledir}/../../..|' "$pc"
done

# Prove it here as gpu_check.sh will use it there: the carried pkgconf, on the carried
# .pc files alone, resolves both modules to files inside .gpu-deps.
export LD_LIBRARY_PATH="$root/$arch_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
pkgconf="$root/usr/bin/pkgconf"
for mod in check jansson; do
  libs=$(PKG_CONFIG_LIBDIR="$pcdir" "$pkgconf" --libs --cflags "$mod") ||
    { echo "gpu-deps.sh: the carried pkgconf cannot resolve $mod" >&2; exit 1; }
  case "$libs" in
    *"$dest"/*) ;;
    *) echo "gpu-deps.sh: $mod resolves outside .gpu-deps: $libs" >&2; exit 1 ;;
  esac
done
for f in usr/include/check.h usr/include/jansson.h "$arch_lib/libcheck_pic.a" \
         "$arch_lib/libjansson.so" "$arch_lib/libsubunit.so"; do
  [ -e "$root/$f" ] || { echo "gpu-deps.sh: $f missing after unpacking" >&2; exit 1; }
done

cat "$dest/MANIFEST"
echo "gpu-deps.sh: .gpu-deps is $(du -sh "$dest" | cut -f1) ($(find "$dest" -type f | wc -l) files);" \
     "the working tree travels with it up to 64 MiB in all"
