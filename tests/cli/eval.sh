#!/usr/bin/env bash
# --eval as tf_cnn_benchmarks runs it:
# - --eval with nothing to evaluate (no --train_dir) is refused, exit 2, as
#   tf_cnn_benchmarks' "Trained model directory not specified"; --eval_random_weights
#   asks for the initial weights by name (every run below), and is refused elsewhere;
# - the report's "Accuracy @ 1 = X Accuracy @ 5 = Y [N examples]" line, before the total
#   block as tf_cnn_benchmarks prints it, with N = timed steps x batch x replicas (warm-up
#   steps not counted) and 0 <= X <= Y <= 1; its step lines are tf's "N<TAB>X
#   examples/sec" (no images/sec line, no step header), every --display_every steps;
# - the batches counted as tf_cnn_benchmarks counts them: --num_eval_batches, else
#   --num_eval_epochs or --num_epochs over the validation split, else --num_batches;
# - exact accuracy summed over replicas (and over ranks when mpirun and the horovod
#   plugin are there) on the `eval_data` fixture, whose zero images tie every logit of an
#   untrained trivial model (a tie is a hit): 1.0000 exactly;
# - every datasource instance is created for the validation split (training=0);
# - the datasource stats extension: every replica's and rank's skipped count added into
#   "skipped N unreadable examples" at the end of the report, whether the datasource
#   answers through its instance or only its plugin descriptor, and no such line when
#   nothing was skipped.
set -euo pipefail
: "${CNNBENCH:?}" "${CNNB_BUILD_DIR:?}" "${CNNB_SOURCE_DIR:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; for f in "$tmp"/*; do echo "--- $f"; cat "$f"; done; exit 1; }
fixtures=$CNNB_BUILD_DIR/fixtures/data

# accuracy_line FILE: the accuracy line's three numbers "X Y N", checked for its format.
accuracy_of() {
  local line
  line=$(grep -P '^Accuracy @ 1 = \d\.\d{4} Accuracy @ 5 = \d\.\d{4} \[\d+ examples\]$' "$1") \
    || fail "$1: no accuracy line in tf_cnn_benchmarks' format"
  [ "$(wc -l <<<"$line")" -eq 1 ] || fail "$1: several accuracy lines"
  sed -E 's/^Accuracy @ 1 = ([0-9.]+) Accuracy @ 5 = ([0-9.]+) \[([0-9]+) examples\]$/\1 \2 \3/' <<<"$line"
}

# 0. Nothing to evaluate: refused before anything runs.
refused() { # refused <message> args...
  local want=$1; shift
  set +e; "$CNNBENCH" "$@" >"$tmp/refused.out" 2>"$tmp/refused.err"; local rc=$?; set -e
  [ "$rc" -eq 2 ] && grep -qF -- "$want" "$tmp/refused.err" || fail "$*: exit $rc, $(cat "$tmp/refused.err")"
  grep -q 'Accuracy @' "$tmp/refused.out" && fail "$*: refused, yet an accuracy was printed"
  return 0
}
refused '--eval: no trained model to evaluate (tf_cnn_benchmarks: "Trained model directory not specified")' \
  --eval --num_batches=1
refused "--eval_random_weights given without --eval" --eval_random_weights --num_batches=1
refused "--eval_random_weights given with --train_dir" --eval --eval_random_weights --train_dir="$tmp/none"
echo "ok: --eval without a model refused; --eval_random_weights only with --eval, without --train_dir"

# 1. Synthetic data, 3 replicas of batch 4, 5 timed steps after 3 warm-up steps.
"$CNNBENCH" --eval --eval_random_weights --num_eval_batches=5 --num_batches=50 --batch_size=4 --num_gpus=3 --variable_update=independent \
  --num_warmup_batches=3 --display_every=2 >"$tmp/eval.out" 2>"$tmp/eval.err" || fail "--eval: exit $?"
grep -q '^Mode:        evaluation$' "$tmp/eval.out" || fail "--eval: mode is not evaluation"
grep -q '^Num batches: 5$' "$tmp/eval.out" || fail "--eval: --num_eval_batches should replace --num_batches"
read -r top1 top5 n < <(accuracy_of "$tmp/eval.out")
[ "$n" -eq 60 ] || fail "--eval: $n examples, want 5 x 4 x 3 = 60 (warm-up not counted)"
awk -v a="$top1" -v b="$top5" 'BEGIN { exit !(a >= 0 && a <= b && b <= 1) }' \
  || fail "--eval: accuracy $top1 / $top5 out of order or range"
# tf_cnn_benchmarks' _eval_once: the accuracy, then the framed total.
tail -4 "$tmp/eval.out" | head -1 | grep -q '^Accuracy @ 1 = ' || fail "--eval: accuracy line is not just before the total block"
tail -2 "$tmp/eval.out" | head -1 | grep -qP '^total images/sec: \d+\.\d\d$' || fail "--eval: no total after the accuracy"
grep -q 'skipped' "$tmp/eval.out" && fail "--eval: synthetic data skipped nothing, yet the report says so"
# tf's _eval_once lines, at cnnbench's displayed steps (1, every 2nd, the last of 5).
[ "$(grep -cP '^\d+\t\d+\.\d examples/sec$' "$tmp/eval.out")" -eq 4 ] || fail "--eval: want 4 'N<TAB>X examples/sec' lines (1, 2, 4, 5)"
grep -qP '^\d+\timages/sec|^Step' "$tmp/eval.out" && fail "--eval: a training-style step line or header"
echo "ok: --eval on 3 replicas: $n examples, accuracy @1 $top1 @5 $top5"

# 2. The batches counted as tf_cnn_benchmarks counts them.
"$CNNBENCH" --eval --eval_random_weights --num_batches=7 --batch_size=4 --num_warmup_batches=0 >"$tmp/count.out" 2>"$tmp/count.err" \
  || fail "--eval --num_batches: exit $?"
read -r _ _ n < <(accuracy_of "$tmp/count.out")
[ "$n" -eq 28 ] || fail "--eval --num_batches=7: $n examples, want 28"
# cifar10's validation split is 10000 examples: 0.01 epochs of a global batch of 16 is
# ceil(100 / 16) = 7 batches, 112 examples (rounded up to whole batches).
for flag in --num_eval_epochs=0.01 --num_epochs=0.01; do
  "$CNNBENCH" --eval --eval_random_weights --model=trivial --data_name=cifar10 "$flag" --batch_size=8 --num_gpus=2 --variable_update=independent \
    --num_warmup_batches=1 >"$tmp/epochs.out" 2>"$tmp/epochs.err" || fail "--eval $flag: exit $?"
  read -r _ _ n < <(accuracy_of "$tmp/epochs.out")
  [ "$n" -eq 112 ] || fail "--eval $flag: $n examples, want 7 batches x 16 = 112"
done
echo "ok: evaluation batches from --num_batches, --num_eval_epochs and --num_epochs"

# 3. Exact accuracy and the stats extension, on the fixture (instance and descriptor).
for ds in eval_data eval_data_desc; do
  "$CNNBENCH" --plugin="$fixtures/libfixture_$ds.so" --datasource=$ds --eval --eval_random_weights --num_eval_batches=5 \
    --batch_size=4 --num_gpus=2 --variable_update=independent --num_warmup_batches=2 --display_every=100 \
    >"$tmp/$ds.out" 2>"$tmp/$ds.err" || fail "$ds: exit $?"
  read -r top1 top5 n < <(accuracy_of "$tmp/$ds.out")
  [ "$top1 $top5 $n" = "1.0000 1.0000 40" ] || fail "$ds: accuracy '$top1 $top5 [$n]', want '1.0000 1.0000 [40]'"
  for shard in 0 1; do
    grep -q "$ds: shard $shard of 2, training=0" "$tmp/$ds.err" || fail "$ds: shard $shard not created for the validation split"
  done
  grep -q "training=1" "$tmp/$ds.err" && fail "$ds: --eval created a datasource for the training split"
  # Shards 0 and 1 skipped 1 and 2: the last line of the report says 3.
  [ "$(tail -1 "$tmp/$ds.out")" = "skipped 3 unreadable examples" ] || fail "$ds: the report does not end with the skipped count"
done
echo "ok: exact accuracy 1.0000 over 2 replicas, the skipped count from the instance and from the descriptor"

# 4. Across ranks, when this machine can run an MPI job.
source "$CNNB_SOURCE_DIR/tests/support/mpi.sh"
if command -v mpirun >/dev/null 2>&1 && [ -e "$CNNB_PLUGIN_DIR/libcnnb_strategy_horovod.so" ]; then
  trap 'mpi_cleanup; rm -rf "$tmp"' EXIT
  CNNB_PLUGIN_PATH=$fixtures mpi_run_bounded 300 2 "$CNNBENCH" --variable_update=horovod \
    --datasource=eval_data --eval --eval_random_weights --num_eval_batches=3 --batch_size=4 --num_warmup_batches=1 \
    --num_intra_threads=1 >"$tmp/mpi.out" 2>"$tmp/mpi.err" || fail "mpirun -np 2 --eval: exit $?"
  read -r top1 top5 n < <(accuracy_of "$tmp/mpi.out")
  [ "$top1 $top5 $n" = "1.0000 1.0000 24" ] || fail "2 ranks: accuracy '$top1 $top5 [$n]', want '1.0000 1.0000 [24]'"
  grep -q '^skipped 3 unreadable examples$' "$tmp/mpi.out" || fail "2 ranks: skipped count not summed over ranks"
  echo "ok: 2 ranks: 24 examples and 3 skipped, summed through the strategy's allgather"
else
  echo "note: mpirun or the horovod plugin missing: the sum over ranks is left to unit_evaluation"
fi
echo "PASS"
