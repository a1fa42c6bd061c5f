#!/usr/bin/env bash
# TensorBoard events (--summary_verbosity, --save_summaries_steps, --eval_dir) and
# tf_cnn_benchmarks' benchmark_run.log / metric.log (docs/checkpoints-and-logs.md,
# "TensorBoard", "Benchmark log"):
# - an events file whose directory cannot be made (--train_dir/eval a regular file) is
#   refused before any step, exit 1, naming the flag and the path;
# - --summary_verbosity with nothing to write in the run says so in one warning;
# - training with --summary_verbosity=1 --save_summaries_steps=2 and evaluations during
#   training: --train_dir gets one events file whose scalars TensorBoard's own reader
#   (EventAccumulator) finds at global steps 3, 5, 7 (timed steps 2, 4, 6 after one
#   warm-up step), each equal to the JSON log's step record (tests/tools/
#   tensorboard_check.py); --train_dir/eval gets the evaluations' eval/Accuracy@1 and @5
#   at the JSON log's eval records' global steps; metric.log and benchmark_run.log hold
#   the same numbers in tf's format;
# - --eval of that checkpoint with --eval_dir: the accuracy at the checkpoint's global
#   step 7, in --eval_dir, as the JSON log's eval record; --train_dir gets nothing new.
# The reading needs TensorBoard (PyPI tensorboard) in $CNNB_PYTHON (default
# /work/anchors/bin/python when it exists, else python3): without it the refusal and the
# warning are checked and the test skips (77), saying why. The fp16 loss_scale scalar is
# not exercised here: the cpu device has no fp16.
set -uo pipefail
: "${CNNBENCH:?}" "${CNNB_SOURCE_DIR:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; for f in "$tmp"/*.out "$tmp"/*.err; do [ -e "$f" ] && { echo "--- $f"; cat "$f"; }; done; exit 1; }
common=(--model=lenet --data_name=mnist --batch_size=4 --num_warmup_batches=1 --num_intra_threads=1)
check=$CNNB_SOURCE_DIR/tests/tools/tensorboard_check.py

# 1. The evaluation events' directory cannot be made: refused at setup, naming it.
mkdir -p "$tmp/blocked" && touch "$tmp/blocked/eval"
rc=0
"$CNNBENCH" "${common[@]}" --num_batches=2 --train_dir="$tmp/blocked" --summary_verbosity=1 \
  --eval_during_training_every_n_steps=1 --num_eval_batches=1 >"$tmp/blocked.out" 2>"$tmp/blocked.err" || rc=$?
[ "$rc" -eq 1 ] || fail "an events directory under a regular file: exit $rc, want 1"
grep -q -- "--train_dir=$tmp/blocked/eval: $tmp/blocked/eval is not a directory" "$tmp/blocked.err" \
  || fail "the refusal does not name the flag and the path"
grep -q 'Step' "$tmp/blocked.out" && fail "steps ran before the events file was refused"
ls "$tmp/blocked" | grep -q tfevents && fail "the refused run left an events file"
echo "ok: an events directory that cannot be made is refused before any step"

# 2. Nothing to write: one warning.
"$CNNBENCH" "${common[@]}" --num_batches=1 --summary_verbosity=1 >"$tmp/nothing.out" 2>"$tmp/nothing.err" \
  || fail "--summary_verbosity=1 without --train_dir: exit $?"
[ "$(grep -c 'summary_verbosity=1 writes nothing in this run' "$tmp/nothing.err")" -eq 1 ] \
  || fail "no single warning that --summary_verbosity=1 writes nothing"
echo "ok: --summary_verbosity with nothing to write says so once"

py=${CNNB_PYTHON:-}
if [ -z "$py" ]; then
  if [ -x /work/anchors/bin/python ]; then py=/work/anchors/bin/python; else py=python3; fi
fi
if ! why=$("$py" -c 'from tensorboard.backend.event_processing.event_accumulator import EventAccumulator' 2>&1); then
  echo "SKIP: TensorBoard's EventAccumulator is not importable by $py ($(tail -1 <<<"$why")): the checks above passed; set CNNB_PYTHON to a Python with tensorboard (pip install tensorboard)"
  exit 77
fi

# 3. Training: events every 2 timed steps, step lines at the same steps (1, 2, 4, 6), an
# evaluation after step 3 and the final one.
train=$tmp/train
"$CNNBENCH" "${common[@]}" --num_batches=6 --display_every=2 --train_dir="$train" \
  --summary_verbosity=1 --save_summaries_steps=2 --print_training_accuracy \
  --eval_during_training_every_n_steps=3 --num_eval_batches=1 --benchmark_log_dir="$tmp/log" \
  >"$tmp/train.out" 2>"$tmp/train.err" || fail "training with --summary_verbosity=1: exit $?"
grep -q "TensorBoard events: $train/events.out.tfevents\." "$tmp/train.err" || fail "the events file is not named on stderr"
"$py" "$check" --jsonl "$tmp/log/benchmark_run.rank0.jsonl" --train "$train" --train_steps 3,5,7 \
  --accuracy --eval "$train/eval" --eval_steps 4,7 --tf_dir "$tmp/log" || fail "training: see above"

# 4. --eval of the checkpoint at global step 7, its events into --eval_dir.
before=$(ls "$train" | grep -c tfevents)
"$CNNBENCH" "${common[@]}" --eval --num_batches=2 --train_dir="$train" --eval_dir="$tmp/evaldir" \
  --benchmark_log_dir="$tmp/evallog" >"$tmp/eval.out" 2>"$tmp/eval.err" || fail "--eval with --eval_dir: exit $?"
"$py" "$check" --jsonl "$tmp/evallog/benchmark_run.rank0.jsonl" --eval "$tmp/evaldir" --eval_steps 7 \
  --tf_dir "$tmp/evallog" || fail "--eval: see above"
[ "$(ls "$train" | grep -c tfevents)" -eq "$before" ] || fail "--eval wrote training events"
echo "PASS"
