#!/usr/bin/env bash
# --eval_during_training_every_n_steps / _every_n_epochs (tf_cnn_benchmarks' flags):
# - tf_cnn_benchmarks' lines: "Running evaluation at global_step G", "B<TAB>R examples/sec"
#   every --display_every evaluation batches, "Accuracy @ 1 = ... [N examples]" (12 fields,
#   no step), "Resuming training"; after the right step lines (every n steps but the last,
#   then "Running final evaluation ..." after the total), N = --num_eval_batches x batch x
#   replicas, G the global step (warm-up steps count);
# - the model evaluated is the one in memory: alexnet on synthetic data (a fixed batch per
#   replica, which the evaluation's datasource instance, for the validation split, draws
#   alike) is near chance before training and fits the batch within 16 steps, and the
#   evaluation sees that; resnet20's evaluation, on batch norm's moving statistics, too;
# - the evaluation datasource instances are created with training=0, the training ones
#   with training=1;
# - --eval_during_training_every_n_epochs at tf_cnn_benchmarks' steps;
# - the default batches per evaluation: one validation epoch, rounded up; with one
#   instance exactly the split's examples are counted (the last batch's excess is not),
#   with several, whole batches;
# - the training's images/sec leave the evaluations out: with evaluations far longer than
#   the training, the training's timed seconds (its images over its images/sec) stay
#   below the evaluations' (which they would exceed if counted);
# - across 2 ranks, the world's examples and skipped counts;
# - refusals (both flags, with --eval) exit 2 naming the flags.
set -euo pipefail
: "${CNNBENCH:?}" "${CNNB_BUILD_DIR:?}" "${CNNB_SOURCE_DIR:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; for f in "$tmp"/*; do echo "--- $f"; cat "$f"; done; exit 1; }
fixtures=$CNNB_BUILD_DIR/fixtures/data
source "$CNNB_SOURCE_DIR/tests/support/eval_lines.sh"
acc_re='Accuracy @ 1 = [0-9]\.[0-9]{4} Accuracy @ 5 = [0-9]\.[0-9]{4} \[[0-9]+ examples\]'

# 1. The in-memory model, evaluated at steps 8 and 16.
"$CNNBENCH" --model=alexnet --data_name=cifar10 --batch_size=8 --num_batches=16 \
  --num_warmup_batches=0 --display_every=8 --optimizer=momentum --init_learning_rate=0.01 \
  --eval_during_training_every_n_steps=8 --num_eval_batches=1 --print_training_accuracy \
  >"$tmp/fit.out" 2>"$tmp/fit.err" || fail "alexnet: exit $?"
grep -E "Accuracy @" "$tmp/fit.out" | grep -vqE "^$acc_re$" && fail "evaluation line format"
[ "$(eval_lines "$tmp/fit.out" | grep -cE '^Step (8|16): Accuracy')" -eq 2 ] || fail "want evaluations at steps 8 and 16 only"
# Order: step line 8, its evaluation, step line 16, the total, the final evaluation.
order=$(sed -nE $'s/^(8|16)\timages\/sec: .*/step \\1/p; s/^Running (final )?evaluation at global_step ([0-9]+)$/\\1eval \\2/p;
  s/^Accuracy @ 1 = .*/accuracy/p; s/^Resuming training$/resume/p; s/^total images\/sec: .*/total/p' "$tmp/fit.out" | tr '\n' '|')
[ "$order" = "step 8|eval 8|accuracy|resume|step 16|total|final eval 16|accuracy|" ] || fail "order of lines: $order"
first=$(awk -F'\t' '$1 == 1 {print $4}' "$tmp/fit.out")
final=$(eval_lines "$tmp/fit.out" | sed -nE 's/^Step 16: Accuracy @ 1 = ([0-9.]+) .*\[8 examples\]$/\1/p')
[ -n "$final" ] || fail "no final evaluation of 8 examples"
awk -v a="$first" -v b="$final" 'BEGIN { exit !(a <= 0.5 && b >= 0.85) }' \
  || fail "the evaluated model did not learn: training top-1 at step 1 $first, evaluation at step 16 $final"
echo "ok: evaluation of the model in memory: top-1 $first at step 1 (training), $final at step 16"

# 1b. Batch norm: the evaluation normalises with the moving statistics, which must come
# from the training executor too (an evaluation without them scores 0 on this run).
"$CNNBENCH" --model=resnet20 --data_name=cifar10 --batch_size=8 --num_batches=20 \
  --num_warmup_batches=0 --optimizer=momentum --init_learning_rate=0.05 \
  --eval_during_training_every_n_steps=10 --num_eval_batches=1 >"$tmp/bn.out" 2>"$tmp/bn.err" \
  || fail "resnet20: exit $?"
bn=$(eval_lines "$tmp/bn.out" | sed -nE 's/^Step 20: Accuracy @ 1 = ([0-9.]+) .*/\1/p')
awk -v b="$bn" 'BEGIN { exit !(b >= 0.85) }' || fail "resnet20: evaluation at step 20 '$bn', want >= 0.85"
echo "ok: batch-norm model evaluated on its moving statistics: top-1 $bn"

# 2. Which split each instance reads, 2 replicas, examples counted over both.
"$CNNBENCH" --plugin="$fixtures/libfixture_eval_data.so" --datasource=eval_data --batch_size=4 \
  --num_gpus=2 --variable_update=independent --num_batches=6 --num_warmup_batches=1 --eval_during_training_every_n_steps=3 \
  --num_eval_batches=2 --display_every=1 >"$tmp/split.out" 2>"$tmp/split.err" || fail "eval_data: exit $?"
# tf's _eval_once: with --display_every=1, each evaluation's 2 batches print one
# "B<TAB>R examples/sec" line each, between the announcement and the accuracy.
shape=$(grep -E $'^Running (final )?evaluation|^[0-9]+\t[0-9.]+ examples/sec$|^Accuracy @' "$tmp/split.out" \
  | sed -E $'s/^Running .*/R/; s/^([0-9]+)\t.*/\\1/; s/^Accuracy.*/A/' | tr -d '\n')
[ "$shape" = "R12AR12A" ] || fail "evaluation lines: '$shape', want R12AR12A (announce, 2 examples/sec lines, accuracy)"
for t in 0 1; do
  for shard in 0 1; do
    grep -q "eval_data: shard $shard of 2, training=$t" "$tmp/split.err" || fail "shard $shard, training=$t not created"
  done
done
# Timed steps 3 and 6 after one warm-up step: global steps 4 and 7.
[ "$(eval_lines "$tmp/split.out" | grep -cE "^Step (4|7): $acc_re$")" -eq 2 ] || fail "evaluations at 4 and 7"
eval_lines "$tmp/split.out" | grep -qE '^Step 4: .*\[16 examples\]$' || fail "2 batches x 4 x 2 replicas = 16 examples"
# Training shards skip 1 + 2, evaluation shards 1 + 2 again.
[ "$(tail -1 "$tmp/split.out")" = "skipped 6 unreadable examples" ] || fail "skipped count of both sets"
echo "ok: training=1 and training=0 instances for both replicas, 16 examples per evaluation"

# 3. Every n epochs, at tf_cnn_benchmarks' steps: cifar10's 50000 training examples,
# 16 a step, 12 steps, every 0.001 epochs: steps 4, 7, 10, then the final one at 12.
"$CNNBENCH" --model=trivial --data_name=cifar10 --batch_size=16 --num_batches=12 \
  --num_warmup_batches=0 --eval_during_training_every_n_epochs=0.001 --num_eval_batches=1 \
  >"$tmp/epochs.out" 2>"$tmp/epochs.err" || fail "every_n_epochs: exit $?"
steps=$(eval_lines "$tmp/epochs.out" | sed -nE 's/^Step ([0-9]+): Accuracy.*/\1/p' | tr '\n' ' ')
[ "$steps" = "4 7 10 12 " ] || fail "every 0.001 epochs: evaluations at '$steps', want '4 7 10 12 '"
echo "ok: every 0.001 epochs at steps $steps"

# 4. The default: one validation epoch (cifar10: 10000 examples) in batches of 2 x 16.
"$CNNBENCH" --model=trivial --data_name=cifar10 --batch_size=16 --num_gpus=2 --variable_update=independent --num_batches=2 \
  --num_warmup_batches=0 --eval_during_training_every_n_steps=1 \
  >"$tmp/default.out" 2>"$tmp/default.err" || fail "default eval batches: exit $?"
eval_lines "$tmp/default.out" | grep -qE '^Step 1: .*\[10016 examples\]$' || fail "want ceil(10000 / 32) = 313 batches, 10016 examples"
echo "ok: one validation epoch by default (313 batches)"
# One instance reads the split in order: 157 batches of 64, and exactly its 10000 counted.
"$CNNBENCH" --model=trivial --data_name=cifar10 --batch_size=64 --num_batches=2 \
  --num_warmup_batches=0 --eval_during_training_every_n_steps=1 \
  >"$tmp/exact.out" 2>"$tmp/exact.err" || fail "exact eval: exit $?"
[ "$(eval_lines "$tmp/exact.out" | grep -cE '^Step [12]: .*\[10000 examples\]$')" -eq 2 ] ||
  fail "one instance: want both evaluations over exactly 10000 examples"
grep -q "157 batches of 64 per replica each time (10000 examples" "$tmp/exact.err" ||
  fail "the setup line does not say 157 batches count 10000 examples"
echo "ok: one instance counts the split's 10000 examples exactly (157 batches of 64)"
# --eval_batch_size: the evaluations' own batch (a second graph at that size) over the
# same examples with the same weights gives the same accuracy as the training's batch.
# Real files (synthetic data makes one fixed batch per size): 64 validation examples,
# read whole in batches of 8 and of 16.
if [ -n "${MAKE_CIFAR:-}" ]; then
  mkdir "$tmp/cifar" && "$MAKE_CIFAR" "$tmp/cifar" 64 7 >/dev/null || fail "making CIFAR-10 files"
  for eb in 8 16; do
    "$CNNBENCH" --model=trivial --data_dir="$tmp/cifar" --data_name=cifar10 --batch_size=8 --eval_batch_size=$eb \
      --num_batches=3 --num_warmup_batches=0 --num_intra_threads=1 --eval_during_training_every_n_steps=2 \
      >"$tmp/eb$eb.out" 2>"$tmp/eb$eb.err" || fail "--eval_batch_size=$eb: exit $?"
    grep -q "$((64 / eb)) batches of $eb per replica each time (64 examples" "$tmp/eb$eb.err" ||
      fail "--eval_batch_size=$eb: the setup line: $(grep evaluating "$tmp/eb$eb.err")"
    grep -q "^Batch size:  8 global" "$tmp/eb$eb.out" || fail "--eval_batch_size changed the training's batch"
  done
  [ "$(eval_lines "$tmp/eb8.out")" = "$(eval_lines "$tmp/eb16.out")" ] && [ -n "$(eval_lines "$tmp/eb8.out")" ] ||
    fail "--eval_batch_size=16 evaluated otherwise than 8: $(eval_lines "$tmp/eb16.out") vs $(eval_lines "$tmp/eb8.out")"
  echo "ok: --eval_batch_size=16 evaluates the 64 examples as batches of 8 do: $(eval_lines "$tmp/eb8.out" | tail -1)"
fi
# Under --eval it is the run's batch, as tf.
"$CNNBENCH" --model=trivial --data_name=cifar10 --eval --eval_random_weights --batch_size=4 \
  --eval_batch_size=6 --num_batches=2 --num_warmup_batches=0 >"$tmp/eval6.out" 2>"$tmp/eval6.err" \
  || fail "--eval --eval_batch_size=6: exit $?"
grep -q "^Batch size:  6 global" "$tmp/eval6.out" && grep -q "\[12 examples\]" "$tmp/eval6.out" \
  || fail "--eval --eval_batch_size=6: not batches of 6: $(cat "$tmp/eval6.out")"
echo "ok: --eval --eval_batch_size=6 runs batches of 6"

# 5. The training's images/sec leave the evaluations out. alexnet's training step costs
# about as much as 7 of its inference batches here; 3 training steps of 4 examples and
# evaluations of 120 batches after steps 1 and 2 make the evaluations before the last step
# about 12 times the training's time, so counting them would show (at 40 batches, 4
# times, the training's steps on a loaded machine once took longer than both).
"$CNNBENCH" --model=alexnet --data_name=cifar10 --batch_size=4 --num_batches=3 \
  --num_warmup_batches=1 --eval_during_training_every_n_steps=1 --num_eval_batches=120 \
  >"$tmp/time.out" 2>"$tmp/time.err" || fail "timing: exit $?"
ips=$(sed -n 's/^total images\/sec: //p' "$tmp/time.out")
evals=$(sed -nE 's/.*evaluation at step [12] took ([0-9.]+) s.*/\1/p' "$tmp/time.err" | awk '{s += $1} END {print s}')
awk -v ips="$ips" -v e="$evals" 'BEGIN { t = 12 / ips; printf "training %.3f s, evaluations %.3f s\n", t, e; exit !(t < e) }' \
  || fail "training's timed seconds (12 / $ips) not below the evaluations' $evals s: evaluation counted?"
echo "ok: evaluations left out of the training's images/sec"

# 6. Across 2 ranks (when mpirun and the horovod plugin are there): each rank evaluates
# its own shard, and the examples and skipped counts are the world's.
source "$CNNB_SOURCE_DIR/tests/support/mpi.sh"
if command -v mpirun >/dev/null 2>&1 && [ -e "$CNNB_PLUGIN_DIR/libcnnb_strategy_horovod.so" ]; then
  trap 'mpi_cleanup; rm -rf "$tmp"' EXIT
  CNNB_PLUGIN_PATH=$fixtures mpi_run_bounded 300 2 "$CNNBENCH" --variable_update=horovod \
    --datasource=eval_data --batch_size=4 --num_batches=4 --num_warmup_batches=1 \
    --eval_during_training_every_n_steps=2 --num_eval_batches=3 --num_intra_threads=1 \
    >"$tmp/mpi.out" 2>"$tmp/mpi.err" || fail "mpirun -np 2: exit $?"
  # Timed steps 2 and 4 after one warm-up step: global steps 3 and 5.
  [ "$(eval_lines "$tmp/mpi.out" | grep -cE '^Step (3|5): .*\[24 examples\]$')" -eq 2 ] || fail "2 ranks: want 2 evaluations of 3 x 4 x 2 = 24 examples"
  grep -q '^skipped 6 unreadable examples$' "$tmp/mpi.out" || fail "2 ranks: skipped count"
  echo "ok: 2 ranks"
fi

# 7. Refusals.
expect_refused() { # expect_refused <message> args...
  local want=$1; shift
  set +e; "$CNNBENCH" "$@" >/dev/null 2>"$tmp/bad.err"; local rc=$?; set -e
  [ "$rc" -eq 2 ] && grep -qF -- "$want" "$tmp/bad.err" || fail "$*: exit $rc, $(cat "$tmp/bad.err")"
}
expect_refused "--eval_during_training_every_n_steps and --eval_during_training_every_n_epochs both given" \
  --eval_during_training_every_n_steps=2 --eval_during_training_every_n_epochs=1
expect_refused "--eval_during_training_every_n_steps and --eval both given" --eval --eval_during_training_every_n_steps=2
expect_refused "--eval_during_training_every_n_epochs and --forward_only both given" --forward_only --eval_during_training_every_n_epochs=1
expect_refused "--num_eval_batches=0: must be at least 1" --eval_during_training_every_n_steps=2 --num_eval_batches=0
# A datasource that cannot say how big an epoch is cannot count evaluations in epochs.
expect_refused "--eval_during_training_every_n_epochs=1: datasource eval_data does not say" \
  --plugin="$fixtures/libfixture_eval_data.so" --datasource=eval_data --eval_during_training_every_n_epochs=1 --num_batches=2
echo "ok: refusals"
echo "PASS"
