#!/usr/bin/env bash
# SIGUSR1, SIGUSR2 and SIGHUP stop a training run as SIGTERM does (issue 35): a batch
# system's warning before a time limit or a preemption (Slurm's `scancel --signal=USR1`,
# `sbatch --signal=USR1@120`; a closed terminal's SIGHUP). For each, one process: the step
# in progress finishes, --train_dir gets that step's checkpoint, one stderr line names the
# signal, the step and the file, the benchmark log's summary says "interrupted" by it, and
# the process ends by the signal (129 HUP, 138 USR1, 140 USR2). The same command run again
# resumes there and ends with the checkpoint an uninterrupted run ends with (every tensor
# equal within 1e-6 of 1 + |value|; the cpu device sums in the same order, so in practice
# bit for bit), while the checkpoint of the stop differs from it (the comparison can
# fail).
set -uo pipefail
: "${CNNBENCH:?}" "${CHECKPOINT_COMPARE:?}"
work=$(mktemp -d)
trap '[ -n "${tpid:-}" ] && kill -9 "$tpid" $(pgrep -P "$tpid") 2>/dev/null; rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*"
  for f in "$work"/*.err; do echo "--- $f"; tail -5 "$f"; done
  exit 1
}

# start NAME SECS CMD...: as tests/cli/interrupt.sh: CMD in the background under timeout
# (--foreground: the signal goes to the child only); $tpid is timeout's, $pid CMD's.
start() {
  local name=$1 secs=$2
  shift 2
  timeout --foreground -s KILL "$secs" "$@" >"$work/$name.out" 2>"$work/$name.err" &
  tpid=$!
  pid=
  for _ in $(seq 100); do
    pid=$(pgrep -P "$tpid") && break
    sleep 0.05
  done
  [ -n "$pid" ] || fail "$name: no process started"
}
until_steps() {
  for _ in $(seq 1200); do
    [ "$(grep -cP '^\d+\t' "$work/$1.out")" -ge "$2" ] && return 0
    kill -0 "$tpid" 2>/dev/null || fail "$1 ended before step $2"
    sleep 0.1
  done
  fail "$1: no step $2 within 120 s"
}
reap() {
  wait "$tpid"
  rc=$?
  tpid=
}

# lenet at batch 4 runs ~50 steps a second on one core: 300 steps leave the signal, sent
# at step 3, seconds to land before the run could end on its own.
total=300
run=(--model=lenet --batch_size=4 --num_intra_threads=1 --num_warmup_batches=2 --display_every=1
     --num_batches=$total)
final=$(printf 'model.ckpt-%010d.safetensors' $((total + 2)))

"$CNNBENCH" "${run[@]}" --train_dir="$work/straight.d" >"$work/straight.out" 2>"$work/straight.err" \
  || fail "the uninterrupted run: exit $?"
[ -s "$work/straight.d/$final" ] || fail "the uninterrupted run left no $final"

for sig in USR1 USR2 HUP; do
  want=$((128 + $(kill -l "$sig")))
  name=train_$sig
  start "$name" 180 "$CNNBENCH" "${run[@]}" --train_dir="$work/$name.d" --benchmark_log_dir="$work/$name.log"
  until_steps "$name" 3
  kill -"$sig" "$pid"
  reap
  [ "$rc" -eq "$want" ] || fail "SIG$sig: exit $rc, not $want (128 + the signal's number)"
  [ "$(grep -c "^cnnbench: SIG$sig " "$work/$name.err")" -eq 1 ] || fail "SIG$sig: not one line on stderr"
  line=$(grep "^cnnbench: SIG$sig " "$work/$name.err")
  [[ $line =~ ^cnnbench:\ SIG$sig\ at\ step\ ([0-9]+)\ \(global\ step\ ([0-9]+)\):\ saved\ checkpoint\ (.+)\;\ stopping$ ]] \
    || fail "SIG$sig: the line does not name the step and the checkpoint: $line"
  step=${BASH_REMATCH[1]} global=${BASH_REMATCH[2]} ckpt=${BASH_REMATCH[3]}
  [ "$step" -lt "$total" ] || fail "SIG$sig: the run had ended (step $step)"
  [ "$ckpt" = "$work/$name.d/$(printf 'model.ckpt-%010d.safetensors' "$global")" ] \
    || fail "SIG$sig: the checkpoint named is $ckpt"
  [ -s "$ckpt" ] || fail "SIG$sig: $ckpt was not written"
  grep -qP "^total images/sec: \d+\.\d\d \(interrupted by SIG$sig after $step of $total steps\)$" \
    "$work/$name.out" || fail "SIG$sig: no total marked as interrupted: $(tail -n 3 "$work/$name.out")"
  rec=$(tail -n 1 "$work/$name.log/benchmark_run.rank0.jsonl")
  [[ $rec == *'"status":"interrupted"'* && $rec == *"\"interrupted\":{\"signal\":\"SIG$sig\",\"step\":$step,\"global_step\":$global,\"saved\":true}"* ]] \
    || fail "SIG$sig: the log's summary does not say where it stopped: $rec"
  # The stop's checkpoint is not the final one: the comparison below can fail.
  if "$CHECKPOINT_COMPARE" 1e-6 "$work/straight.d/$final" "$ckpt" >"$work/$name.cmp0" 2>&1; then
    fail "SIG$sig: the checkpoint of step $global already equals the final one"
  fi
  # The same command again: resumes there, runs to the total.
  "$CNNBENCH" "${run[@]}" --train_dir="$work/$name.d" >"$work/$name.resume.out" 2>"$work/$name.resume.err" \
    || fail "SIG$sig: the resumed run: exit $?"
  grep -qF "resuming from $ckpt (global step $global)" "$work/$name.resume.err" \
    || fail "SIG$sig: the resumed run did not start from $ckpt"
  "$CHECKPOINT_COMPARE" 1e-6 "$work/straight.d/$final" "$work/$name.d/$final" >"$work/$name.cmp" 2>&1 \
    || fail "SIG$sig: the resumed run ends elsewhere than the uninterrupted one: $(cat "$work/$name.cmp")"
  echo "ok: SIG$sig at step $step: exit $rc, saved $(basename "$ckpt"), resumed to $final: $(cat "$work/$name.cmp")"
done
echo PASS
