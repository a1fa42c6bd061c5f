#!/usr/bin/env bash
# One writer per --train_dir, and a directory that cannot be written refused up front
# (issue 23, findings 3 and 4; a read-only mount: cli_train_dir_readonly, a non-root user:
# cli_checkpoint_nonroot):
# - while run A trains in DIR, run B on DIR is refused at once (it does not wait for A),
#   exit 1, naming A's pid and host, and writes nothing there; under mpirun (horovod, 2 ranks) rank 0 is refused the
#   same way and rank 1 stops with it, both promptly;
# - A killed with -9 leaves its lock file: the next run takes it over, saying whose it
#   was, and removes it when it ends;
# - --train_dir=/proc/self (exists, cannot be written): refused before the first step.
set -euo pipefail
: "${CNNBENCH:?}" "${CNNB_SOURCE_DIR:?}" "${CNNB_PLUGIN_DIR:?}"
source "$CNNB_SOURCE_DIR/tests/support/mpi.sh"
tmp=$(mktemp -d)
holder=
trap '[ -n "$holder" ] && kill -9 "$holder" 2>/dev/null; mpi_cleanup; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; for f in "$tmp"/*.out "$tmp"/*.err; do echo "--- $f"; cat "$f"; done; exit 1; }
args=(--model=trivial --data_name=cifar10 --batch_size=2 --num_warmup_batches=0 --num_intra_threads=1)
try() { local name=$1; shift; set +e; "$CNNBENCH" "${args[@]}" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"; code=$?; set -e; }
try_for() { local secs=$1 name=$2; shift 2; set +e; timeout "$secs" "$CNNBENCH" "${args[@]}" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"; code=$?; set -e; }
# Starts a run that trains until killed, and waits until it holds DIR's lock.
hold() {
  "$CNNBENCH" "${args[@]}" --num_batches=1000000000 --train_dir="$1" >"$tmp/holder.out" 2>"$tmp/holder.err" &
  holder=$!
  for _ in $(seq 300); do
    grep -qs "^pid=$holder host=" "$1/cnnbench.lock" && return 0
    kill -0 "$holder" 2>/dev/null || fail "the holding run ended"
    sleep 0.1
  done
  fail "the holding run never took the lock"
}
host=$(hostname)

hold "$tmp/d"
# Refused while the holder trains on (it never ends by itself): a run that waited for the
# lock would be killed by the timeout (exit 124).
try_for 300 second --num_batches=2 --train_dir="$tmp/d"
[ "$code" -eq 1 ] || fail "a second run on the same --train_dir: exit $code, expected 1"
kill -0 "$holder" 2>/dev/null || fail "the holder ended: the refusal proves nothing"
grep -qF -- "--train_dir=$tmp/d is in use by another run: pid $holder on host $host" "$tmp/second.err" \
  || fail "the refusal does not name the holder's pid and host"
grep -q "images/sec" "$tmp/second.out" && fail "the second run trained"
[ -z "$(ls "$tmp/d" | grep -v '^cnnbench.lock$')" ] || fail "the second run wrote into the directory"

if command -v mpirun >/dev/null && [ -e "$CNNB_PLUGIN_DIR/libcnnb_strategy_horovod.so" ]; then
  # Bounded generously: two ASan ranks on a loaded 2-core machine take minutes to start.
  set +e
  mpi_run_bounded 400 2 "$CNNBENCH" "${args[@]}" --num_batches=2 --variable_update=horovod \
    --train_dir="$tmp/d" >"$tmp/mpi.out" 2>"$tmp/mpi.err"
  code=$?
  set -e
  [ "$code" -ne 0 ] || fail "2 ranks on a held --train_dir: accepted"
  grep -qF "error: [rank 0] --train_dir=$tmp/d is in use by another run: pid $holder" "$tmp/mpi.err" \
    || fail "2 ranks: rank 0 does not name the holder"
  grep -qF "error: [rank 1] rank 0 could not take --train_dir" "$tmp/mpi.err" \
    || fail "2 ranks: rank 1 does not say why it stopped"
else
  echo "note: no mpirun or horovod plugin: the two-rank part did not run"
fi

kill -9 "$holder"
wait "$holder" 2>/dev/null || true
dead=$holder
holder=
[ -f "$tmp/d/cnnbench.lock" ] || fail "kill -9 left no lock file (nothing to take over)"
try takeover --num_batches=2 --train_dir="$tmp/d"
[ "$code" -eq 0 ] || fail "after the holder was killed: exit $code"
grep -qF "taking over its lock $tmp/d/cnnbench.lock, left by pid $dead on host $host, which is gone" \
  "$tmp/takeover.err" || fail "the stale lock was not taken over with a line saying so"
[ ! -e "$tmp/d/cnnbench.lock" ] || fail "the lock file outlived its run"

try proc --num_batches=2 --train_dir=/proc/self
[ "$code" -eq 1 ] || fail "--train_dir=/proc/self: exit $code, expected 1"
grep -qF -- "--train_dir=/proc/self: cannot write there" "$tmp/proc.err" || fail "/proc/self: not named"
grep -q "images/sec" "$tmp/proc.out" && fail "/proc/self: steps ran before the refusal"
echo PASS
