# tests/support/mpi.sh — sourced by the tests that run real OpenMPI jobs on this machine.
#   mpi_require            skips the test (exit 77, saying why) without mpirun or the
#                          strategy plugins that need it
#   mpi_run NP ARGS...     mpirun with NP processes on this host: oversubscribed (2 cores
#                          run 4 ranks), allowed as root (CI runs as root), shared memory
#                          and loopback TCP only, output tagged per rank
#   mpi_run_bounded SECS NP ARGS...   the same under `timeout -s KILL SECS`: a test that
#                          hangs fails instead of holding CI
# Every job's processes are killed when the test exits, even when it fails half way.
mpi_require() {
  command -v mpirun >/dev/null 2>&1 || { echo "SKIP: mpirun not found (apt-get install openmpi-bin)"; exit 77; }
  local p
  for p in "$@"; do
    [ -e "$CNNB_PLUGIN_DIR/libcnnb_strategy_$p.so" ] \
      || { echo "SKIP: strategy plugin $p not built (MPI off at configure?)"; exit 77; }
  done
}

MPI_FLAGS=(--allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader,tcp
           --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
mpi_run() {
  local np=$1; shift
  mpirun "${MPI_FLAGS[@]}" -np "$np" "$@"
}
mpi_run_bounded() {
  local secs=$1 np=$2; shift 2
  timeout -s KILL "$secs" mpirun "${MPI_FLAGS[@]}" -np "$np" "$@"
}
