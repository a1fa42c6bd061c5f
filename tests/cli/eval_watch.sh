#!/usr/bin/env bash
# --eval --eval_interval_secs=N (tf_cnn_benchmarks' eval loop): a watching --eval
# evaluates the checkpoint a training run left, then the next one when it appears (each
# once: no second evaluation of the same checkpoint at later looks), and says tf's
# "Checkpoint not found in DIR" while there is none; SIGINT or SIGTERM while it waits
# stops it at once, one line saying how many it evaluated, the process ending by the
# signal (130 / 143). Bad combinations are refused or warned about.
set -uo pipefail
: "${CNNBENCH:?}"
work=$(mktemp -d)
trap '[ -n "${tpid:-}" ] && kill -9 "$tpid" $(pgrep -P "$tpid") 2>/dev/null; rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*"
  for f in "$work"/*.out "$work"/*.err; do [ -e "$f" ] && { echo "--- $f"; tail -8 "$f"; }; done
  exit 1
}
# start NAME CMD...: CMD in the background under `timeout --foreground` (so SIGINT is not
# ignored, as in a script's background job); $pid is CMD's own.
start() {
  local name=$1
  shift
  timeout --foreground -s KILL 300 "$@" >"$work/$name.out" 2>"$work/$name.err" &
  tpid=$!
  pid=
  for _ in $(seq 100); do
    pid=$(pgrep -P "$tpid") && break
    sleep 0.05
  done
  [ -n "$pid" ] || fail "$name: no process started"
}
# until_count NAME PATTERN N: NAME's report holds N lines matching PATTERN (within 120 s).
until_count() {
  for _ in $(seq 1200); do
    [ "$(grep -c -- "$2" "$work/$1.out")" -ge "$3" ] && return 0
    kill -0 "$tpid" 2>/dev/null || fail "$1 ended before $3 lines '$2'"
    sleep 0.1
  done
  fail "$1: no $3 lines '$2' within 120 s"
}
common=(--model=trivial --data_name=cifar10 --batch_size=4 --num_intra_threads=1 --num_warmup_batches=0)
train() { "$CNNBENCH" "${common[@]}" --train_dir="$work/train" --num_batches="$1" >"$work/train$1.out" 2>"$work/train$1.err" || fail "training to $1: exit $?"; }
watch=(--eval --train_dir="$work/train" --eval_interval_secs=1 --num_batches=2 "${common[@]}")

# 1. Nothing yet: tf's line, once; SIGTERM while waiting ends it by the signal.
start empty "$CNNBENCH" "${watch[@]}"
until_count empty "^Checkpoint not found in $work/train\$" 1
sleep 2.5 # two more looks
[ "$(grep -c "Checkpoint not found" "$work/empty.out")" -eq 1 ] || fail "'Checkpoint not found' said more than once"
kill -TERM "$pid"
wait "$tpid"; rc=$?; tpid=
[ $rc -eq 143 ] || fail "SIGTERM while waiting: exit $rc, want 143"
grep -q "SIGTERM while waiting for a new checkpoint in $work/train: stopping after 0 evaluations" "$work/empty.err" \
  || fail "no line saying the watch stopped"
echo "ok: no checkpoint: tf's line once, SIGTERM ends the wait (143)"

# 2. A checkpoint at step 3, then one at step 6 while it watches: each evaluated once.
train 3
start watch "$CNNBENCH" "${watch[@]}"
until_count watch "Accuracy @ 1 = " 1
train 6 # resumes: steps 4..6, a checkpoint at 6
until_count watch "Accuracy @ 1 = " 2
sleep 2.5
[ "$(grep -c "Accuracy @ 1 = " "$work/watch.out")" -eq 2 ] || fail "a checkpoint evaluated twice: $(grep -c Accuracy "$work/watch.out") evaluations"
for step in 3 6; do
  grep -q "evaluating $work/train/model.ckpt-000000000$step.safetensors (global step $step)" "$work/watch.err" \
    || fail "checkpoint $step was not the one evaluated"
done
grep -q "^Waiting for a checkpoint of $work/train newer than global step 6 (every 1 s)$" "$work/watch.out" \
  || fail "no line saying what it waits for"
kill -INT "$pid"
wait "$tpid"; rc=$?; tpid=
[ $rc -eq 130 ] || fail "SIGINT while waiting: exit $rc, want 130"
grep -q "SIGINT while waiting for a new checkpoint in $work/train: stopping after 2 evaluations" "$work/watch.err" \
  || fail "no line saying 2 evaluations"
echo "ok: checkpoints 3 and 6 evaluated once each as they appeared; SIGINT stops it (130)"

# 3. Refused or warned.
"$CNNBENCH" "${common[@]}" --eval --eval_random_weights --eval_interval_secs=5 >"$work/r.out" 2>"$work/r.err"; rc=$?
[ $rc -eq 2 ] && grep -q -- "--eval_interval_secs with --eval_random_weights" "$work/r.err" \
  || fail "--eval_interval_secs with random weights: exit $rc"
"$CNNBENCH" "${common[@]}" --num_batches=1 --eval_interval_secs=5 >"$work/w.out" 2>"$work/w.err" \
  && [ "$(grep -c -- "--eval_interval_secs=5 has no effect here" "$work/w.err")" -eq 1 ] \
  || fail "--eval_interval_secs while training: no one warning: $(cat "$work/w.err")"
"$CNNBENCH" "${watch[@]/--eval_interval_secs=1/--eval_interval_secs=-1}" >"$work/n.out" 2>"$work/n.err"; rc=$?
[ $rc -eq 2 ] && grep -q -- "--eval_interval_secs=-1" "$work/n.err" || fail "--eval_interval_secs=-1: exit $rc"
echo "PASS: --eval_interval_secs"
