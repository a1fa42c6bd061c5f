#!/usr/bin/env bash
# A rank lost mid-run ends the job on every rank, within a bound, naming it, for every
# strategy that spans processes (horovod, replicated, parameter_server synchronous and
# asynchronous):
# - kill -9 of rank 1: mpirun sees it die and ends the job (naming rank 1), or rank 0's
#   allreduce times out and names it; non-zero exit within 60 s;
# - SIGSTOP of rank 1: nothing dies, so only cnnbench can tell: rank 0 reports "rank 1
#   stopped answering" within --collective_timeout_s (10) plus the probe window (3) plus
#   margin, exits non-zero, mpirun ends the job, and no process is left behind.
# lenet at batch 16 for 100000 steps runs far longer than the test, so the signal lands
# mid-run; the test waits for the first step lines before sending it.
set -euo pipefail
: "${CNNBENCH:?}" "${CNNB_SOURCE_DIR:?}"
source "$CNNB_SOURCE_DIR/tests/support/mpi.sh"
mpi_require horovod replicated parameter_server
tmp=$(mktemp -d)
trap 'mpi_cleanup; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; [ -f "$tmp/log" ] && tail -n 30 "$tmp/log"; exit 1; }

TIMEOUT=10
common=(--model=lenet --batch_size=16 --num_batches=100000 --num_warmup_batches=0 --num_intra_threads=1
        --display_every=10 --collective_timeout_s=$TIMEOUT)

# Starts the job in the background (its exit status goes to $tmp/rc), waits until rank 0
# has reported steps and rank 1's pid is known (in $victim).
start_job() {
  rm -f "$tmp/rc"
  (rc=0; mpi_run_bounded 300 2 "$CNNBENCH" "${args[@]}" >"$tmp/log" 2>&1 || rc=$?; echo "$rc" >"$tmp/rc") &
  job=$!
  victim=
  for _ in $(seq 600); do
    victim=$(mpi_rank_pid 1)
    [ -n "$victim" ] && grep -q "^20	images/sec" "$tmp/log" 2>/dev/null && return 0
    [ -f "$tmp/rc" ] && fail "the job ended before the signal (exit $(cat "$tmp/rc"))"
    sleep 0.1
  done
  fail "no steps after 60 s"
}

# Waits for the job; sets $rc and $took (seconds since the signal).
wait_job() {
  wait "$job" || true
  rc=$(cat "$tmp/rc")
  took=$((SECONDS - signalled))
}

no_leftovers() {
  for _ in $(seq 20); do [ -z "$(mpi_pids)" ] && return 0; sleep 0.5; done
  fail "processes left behind after $1: $(mpi_pids)"
}

# What rank 0 (or rank 1's partner) says about a stopped rank 1, per strategy: the
# collectives name it from their liveness probe (a bucket's allreduce, or the allgather
# each step starts with, run/interrupted.h, whichever rank 0 waits in); the asynchronous parameter server's
# server thread names the rank that stopped pushing (or, when the signal lands while it
# answers rank 1, the rank that stopped taking its answer).
for case in "horovod|rank 1 stopped answering: no reply within $TIMEOUT s while" \
            "replicated|rank 1 stopped answering: no reply within $TIMEOUT s while" \
            "parameter_server|rank 1 stopped answering: no reply within $TIMEOUT s while" \
            "parameter_server --cross_replica_sync=false|rank 1 stopped answering: "; do
strategy=${case%%|*} stopped_message=${case#*|}
read -r -a extra <<<"$strategy"
args=("${common[@]}" --variable_update="${extra[0]}" "${extra[@]:1}")
echo "-- $strategy"
start_job
kill -KILL "$victim"
signalled=$SECONDS
wait_job
[ "$rc" != 0 ] || fail "kill -9 of rank 1: the job exited 0"
[ "$took" -le 60 ] || fail "kill -9 of rank 1: the job took $took s to end"
grep -Eq "process rank 1 .*(signal 9|Killed)|rank 1 stopped answering" "$tmp/log" \
  || fail "kill -9 of rank 1: no message names rank 1"
no_leftovers "kill -9"
echo "ok: kill -9 of rank 1: exit $rc after $took s, rank 1 named: $(grep -Eo "process rank 1 .*(signal 9|Killed).*|rank 1 stopped answering.*" "$tmp/log" | head -n 1)"

start_job
kill -STOP "$victim"
signalled=$SECONDS
wait_job
[ "$rc" != 0 ] || fail "SIGSTOP of rank 1: the job exited 0"
[ "$took" -le $((TIMEOUT + 3 + 20)) ] || fail "SIGSTOP of rank 1: the job took $took s to end"
grep -qF "$stopped_message" "$tmp/log" \
  || fail "SIGSTOP of rank 1: rank 0 did not name rank 1"
no_leftovers "SIGSTOP"
echo "ok: SIGSTOP of rank 1: exit $rc after $took s: $(grep -o "rank 1 stopped answering.*" "$tmp/log")"
done
