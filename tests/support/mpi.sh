# tests/support/mpi.sh — sourced by the tests that run real OpenMPI jobs on this machine.
#   mpi_require [PLUGIN...]  skips the test (exit 77, saying why) without mpirun or the
#                          strategy plugins that need it
#   mpi_run NP ARGS...     mpirun with NP processes on this host: oversubscribed (2 cores
#                          run 4 ranks), allowed as root (CI runs as root), shared memory
#                          and loopback TCP only, output tagged per rank
#   mpi_run_bounded SECS NP ARGS...   the same under `timeout -s KILL SECS`: a test that
#                          hangs fails instead of holding CI
#   mpi_pids               the live processes of this test's jobs (mpirun and its ranks),
#                          one pid a line: those carrying this test's CNNB_MPI_JOB_TAG
#                          (every command the test runs carries it: call it as $(mpi_pids),
#                          not piped into another command, which would be listed too)
#   mpi_rank_pid RANK      the pid of this test's process of MPI rank RANK (empty if none)
#   mpi_cleanup            continues and kills whatever mpi_pids lists
# Every job's processes are killed when the test exits, even when it fails half way: an
# EXIT trap runs mpi_cleanup (a test that sets its own EXIT trap calls mpi_cleanup in it).
# Processes are found by a tag in their environment, never by name, so a test kills only
# its own, even beside other tests running the same binaries.
mpi_require() {
  command -v mpirun >/dev/null 2>&1 || { echo "SKIP: mpirun not found (apt-get install openmpi-bin)"; exit 77; }
  local p
  for p in "$@"; do
    [ -e "$CNNB_PLUGIN_DIR/libcnnb_strategy_$p.so" ] \
      || { echo "SKIP: strategy plugin $p not built (MPI off at configure?)"; exit 77; }
  done
}

export CNNB_MPI_JOB_TAG="cnnb-mpi-test-$$-$RANDOM"

# Under the sanitizers (CNNB_SANITIZE=1): OpenMPI leaves ~120 kB allocated at
# MPI_Finalize (component registries, PMIx's progress thread), which LeakSanitizer would
# report on every rank. lsan_openmpi.supp suppresses leaks allocated inside OpenMPI's own
# libraries, and only those. Its libraries are built without frame pointers, so ASan's
# fast unwinder stops one frame into them and the suppressions could not match: the slow
# (DWARF) unwinder is used for these jobs instead.
if [ -n "${CNNB_SANITIZE:-}" ]; then
  export LSAN_OPTIONS="suppressions=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lsan_openmpi.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
fi

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

# Whether /proc/PID/environ ($1) holds the entry $2. Read with builtins only: a grep
# would carry the tag too and find itself.
mpi_environ_has() {
  local entry
  { while IFS= read -r -d '' entry; do [ "$entry" = "$2" ] && return 0; done < "$1"; } 2>/dev/null
  return 1
}

# A process's environment as it was started: exported variables of this shell reach its
# children (mpirun, the ranks), not this shell's own /proc entry. Zombies have none.
mpi_pids() {
  local p
  for p in /proc/[0-9]*; do
    mpi_environ_has "$p/environ" "CNNB_MPI_JOB_TAG=$CNNB_MPI_JOB_TAG" && echo "${p#/proc/}"
  done
  return 0
}

mpi_rank_pid() {
  local p
  for p in $(mpi_pids); do
    mpi_environ_has "/proc/$p/environ" "OMPI_COMM_WORLD_RANK=$1" && { echo "$p"; return 0; }
  done
  return 0
}

# (No external command in a pipeline with mpi_pids: it would carry the tag and be listed.)
mpi_cleanup() {
  local pids
  pids=$(mpi_pids)
  pids=${pids//$'\n'/ }
  [ -n "$pids" ] || return 0
  echo "mpi.sh: killing processes left behind: $pids" >&2
  kill -CONT $pids 2>/dev/null || true
  kill -KILL $pids 2>/dev/null || true
}
trap mpi_cleanup EXIT
