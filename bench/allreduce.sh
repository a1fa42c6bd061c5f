#!/usr/bin/env bash
# allreduce.sh — issue 8's all-reduce microbenchmark in nccl-tests' terms (time, algbw =
# bytes / time, busbw = algbw * 2(n-1)/n, #wrong) for 4 KiB .. 256 MiB per replica, x4
# steps: the replicated strategy's local xring and pscpu among n = 2 and 4 host buffers of
# one process (one thread, as its communication thread), then MPI_Allreduce across
# `mpirun -np 2` ranks on this host (shared memory / loopback, as tests/support/mpi.sh).
# bench/allreduce_bench.c says how each figure is taken.
#
# Usage: bench/allreduce.sh [--build=DIR] [--np=2] [--replicas=2,4] [--max_bytes=268435456]
#                           [--no-mpi]
# The build (default $CNNB_BUILD or ./build) gets its allreduce_bench target brought up to
# date first (NO_BUILD=1 skips that). About 2 minutes on an idle 2-core machine; the
# buffers take replicas x max_bytes (1 GiB for 4 x 256 MiB).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${CNNB_BUILD:-$REPO/build}
NP=2 REPLICAS=2,4 MAX_BYTES=268435456 MPI=1
for a in "$@"; do
  case "$a" in
    --build=*) BUILD=${a#*=} ;;
    --np=*) NP=${a#*=} ;;
    --replicas=*) REPLICAS=${a#*=} ;;
    --max_bytes=*) MAX_BYTES=${a#*=} ;;
    --no-mpi) MPI=0 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "allreduce.sh: unknown argument '$a' (see --help)" >&2; exit 2 ;;
  esac
done
die() { echo "allreduce.sh: $*" >&2; exit 2; }

BIN="$BUILD/bin/allreduce_bench"
if [ "${NO_BUILD:-0}" != 1 ] && [ -f "$BUILD/CMakeCache.txt" ]; then
  cmake --build "$BUILD" --target allreduce_bench -j2 >/dev/null \
    || die "building allreduce_bench in $BUILD failed"
fi
[ -x "$BIN" ] || die "no $BIN: configure and build $BUILD first (cmake -S $REPO -B $BUILD && cmake --build $BUILD --target allreduce_bench)"

echo "# $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "# $BIN local --replicas=$REPLICAS --max_bytes=$MAX_BYTES"
"$BIN" local --replicas="$REPLICAS" --max_bytes="$MAX_BYTES"
if [ "$MPI" = 1 ]; then
  command -v mpirun >/dev/null 2>&1 || die "mpirun not found (apt-get install openmpi-bin), or pass --no-mpi"
  # shellcheck source=../tests/support/mpi.sh
  source "$REPO/tests/support/mpi.sh"
  echo "# $(mpirun --version 2>&1 | head -1): mpirun ${MPI_FLAGS[*]} -np $NP $BIN mpi --max_bytes=$MAX_BYTES"
  mpi_run "$NP" "$BIN" mpi --max_bytes="$MAX_BYTES"
fi
