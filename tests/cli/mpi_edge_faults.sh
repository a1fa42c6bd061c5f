#!/usr/bin/env bash
# A rank lost where MPI itself takes no timeout ends the job within a bound, naming what
# (strategy_faults.sh covers a rank lost mid-run, inside the bounded collectives):
# - before joining: rank 1 stops itself (SIGSTOP) before it execs cnnbench, so rank 0
#   waits in MPI_Init_thread for a rank that never comes: the watchdog ends rank 0 after
#   the longer of --collective_timeout_s and 30 s, saying the job was not joined;
# - after the run's last exchange (CNNB_FAULT_SIGSTOP_AT=mpi_finalize: rank 1 stops
#   before the barrier of leaving): rank 0 prints its total, then the barrier times out
#   and names rank 1;
# - between that barrier and MPI_Finalize (mpi_finalize_call): rank 0's MPI_Finalize
#   waits for rank 1 and the watchdog ends it (30 s, as above).
# The watchdog's two cases run on horovod only (its code is the strategies' shared MPI
# layer), the barrier on horovod and replicated.
# Each: a non-zero exit within the timeout plus the probe window plus margin, the
# message, the report complete on rank 0, and no process left behind (mpirun kills the
# stopped rank).
set -euo pipefail
: "${CNNBENCH:?}" "${CNNB_SOURCE_DIR:?}"
source "$CNNB_SOURCE_DIR/tests/support/mpi.sh"
mpi_require horovod replicated
tmp=$(mktemp -d)
trap 'mpi_cleanup; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; [ -f "$tmp/log" ] && tail -n 30 "$tmp/log"; exit 1; }

TIMEOUT=5
WATCHDOG=30 # mpi_world.c's WATCHDOG_MIN_S, above TIMEOUT
no_leftovers() {
  for _ in $(seq 20); do [ -z "$(mpi_pids)" ] && return 0; sleep 0.5; done
  fail "processes left behind after $1: $(mpi_pids)"
}

# run_case NAME MESSAGE REPORT RANK1_PROGRAM...: rank 0 runs cnnbench, rank 1 the program
# given (which runs cnnbench its own way); expects a non-zero exit within the bound, the
# message (fixed string), and the total line when REPORT is "report".
run_case() {
  local name=$1 message=$2 report=$3
  shift 3
  local start=$SECONDS rc=0
  mpi_run_bounded 120 1 "$CNNBENCH" "${args[@]}" : -np 1 "$@" >"$tmp/log" 2>&1 || rc=$?
  local took=$((SECONDS - start))
  [ "$rc" != 0 ] || fail "$name: the job exited 0"
  [ "$rc" != 137 ] || fail "$name: the job hung until the test's kill after $took s"
  [ "$took" -le $((WATCHDOG + 30)) ] || fail "$name: the job took $took s to end"
  grep -qF -- "$message" "$tmp/log" || fail "$name: no \"$message\""
  if [ "$report" = report ]; then
    grep -q "^total images/sec: " "$tmp/log" || fail "$name: rank 0's report has no total"
  fi
  no_leftovers "$name"
  echo "ok: $name: exit $rc after $took s: $(grep -oF -- "$message" "$tmp/log" | head -n 1)"
}

for strategy in horovod replicated; do
  args=(--model=lenet --batch_size=8 --num_batches=20 --num_warmup_batches=1 --num_intra_threads=1
        --variable_update=$strategy --collective_timeout_s=$TIMEOUT)
  echo "-- $strategy"
  run_case "stopped after the last exchange" \
    "[rank 0] $strategy: rank 1 stopped answering: no reply within $TIMEOUT s while waiting at a barrier for every rank to leave the job" \
    report env CNNB_FAULT_SIGSTOP_AT=mpi_finalize "$CNNBENCH" "${args[@]}"
  [ "$strategy" = horovod ] || continue
  # shellcheck disable=SC2016 # $$ and "$@" are the inner shell's
  run_case "stopped before joining" \
    "[rank 0] $strategy: the MPI job was not joined within $WATCHDOG s (the longer of --collective_timeout_s=$TIMEOUT and $WATCHDOG s)" \
    no-report sh -c 'kill -STOP $$; exec "$@"' sh "$CNNBENCH" "${args[@]}"
  run_case "stopped before MPI_Finalize" \
    "[rank 0] $strategy: MPI_Finalize did not return within $WATCHDOG s (the longer of --collective_timeout_s=$TIMEOUT and $WATCHDOG s)" \
    report env CNNB_FAULT_SIGSTOP_AT=mpi_finalize_call "$CNNBENCH" "${args[@]}"
done
