#!/usr/bin/env bash
# Resuming continues a run as if it had never stopped: 20 steps straight and 10 steps, then
# 10 more resumed from --train_dir (--num_batches=20: the total on resume, as
# tf_cnn_benchmarks' end_local_step = num_batches - global_step), print the same loss at
# every step and end with the same checkpoint (parameters, batch-norm statistics, optimizer slots: equal within 1e-6
# of 1 + |value|; the cpu device computes the same sums in the same order, so in practice
# bit for bit). The run uses what a resume must carry: momentum slots, Adam's update count,
# a learning-rate schedule whose boundary falls in the resumed half, batch-norm moving
# statistics; and the same under parameter_server, which keeps the optimizer's slots itself.
# Losing the momentum on resume makes the comparison fail. Then: --eval --train_dir
# evaluates the latest checkpoint, and a checkpoint is refused by another model and by
# another optimizer, naming both; a checkpoint already at --num_batches is refused (nothing
# left to train), and tf's own train_and_eval count holds with warm-up steps: a run of 20
# after 5 warm-up steps ends at global step 25, so --num_batches=40 resumed runs 15.
set -euo pipefail
: "${CNNBENCH:?}" "${CHECKPOINT_COMPARE:?}" "${CHECKPOINT_EDIT:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; for f in "$tmp"/*.out "$tmp"/*.err; do echo "--- $f"; cat "$f"; done; exit 1; }

# resnet20 on synthetic CIFAR-10 at batch 4: 20 steps take a few seconds. The schedule's
# decay, every 0.0012 epochs of 50000 examples, falls at step 15.
common=(--model=resnet20 --data_name=cifar10 --batch_size=4 --num_warmup_batches=0 --num_intra_threads=1
        --display_every=1 --weight_decay=0.0001
        --init_learning_rate=0.05 --num_epochs_per_decay=0.0012 --learning_rate_decay_factor=0.1)
losses() { grep -oP '^\d+\timages/sec: .*\t\K\d+\.\d{3}$' "$1"; }

for optimizer in momentum adam; do
  run() { "$CNNBENCH" "${common[@]}" --optimizer=$optimizer "$@"; }
  run --num_batches=20 --train_dir="$tmp/$optimizer-straight" >"$tmp/straight.out" 2>"$tmp/straight.err" \
    || fail "$optimizer: straight run exit $?"
  run --num_batches=10 --train_dir="$tmp/$optimizer-resumed" >"$tmp/first.out" 2>"$tmp/first.err" \
    || fail "$optimizer: first half exit $?"
  grep -q "no checkpoint in .* yet: training starts at step 0" "$tmp/first.err" \
    || fail "$optimizer: the first half did not say it starts fresh"
  run --num_batches=20 --train_dir="$tmp/$optimizer-resumed" >"$tmp/second.out" 2>"$tmp/second.err" \
    || fail "$optimizer: second half exit $?"
  grep -q "resuming from .*model.ckpt-0000000010.safetensors (global step 10)" "$tmp/second.err" \
    || fail "$optimizer: the second half did not resume from step 10"
  [ "$(losses "$tmp/straight.out" | wc -l)" -eq 20 ] || fail "$optimizer: 20 step lines expected"
  [ "$(losses "$tmp/second.out" | wc -l)" -eq 10 ] || fail "$optimizer: the resumed half should run 10 of the 20"
  grep -q '^Num batches: 20$' "$tmp/second.out" || fail "$optimizer: the header should show the total, 20"
  diff <(losses "$tmp/straight.out") <(cat <(losses "$tmp/first.out") <(losses "$tmp/second.out")) \
    >"$tmp/loss.diff" || fail "$optimizer: the losses differ: $(cat "$tmp/loss.diff")"
  # The resumed half must not just repeat the first: the losses move.
  [ "$(losses "$tmp/second.out" | sort -u | wc -l)" -gt 1 ] || fail "$optimizer: a flat loss proves nothing"
  "$CHECKPOINT_COMPARE" 1e-6 "$tmp/$optimizer-straight/model.ckpt-0000000020.safetensors" \
    "$tmp/$optimizer-resumed/model.ckpt-0000000020.safetensors" >"$tmp/compare.out" \
    || fail "$optimizer: the final checkpoints differ: $(cat "$tmp/compare.out")"
  echo "$optimizer: 20 losses equal; $(cat "$tmp/compare.out")"
done

# A strategy that keeps the variables and the optimizer's slots itself (parameter_server,
# two replicas): its slots travel through cnnb.strategy.optimizer_state/1, and the resume
# is as exact.
ps=(--variable_update=parameter_server --num_gpus=2 --optimizer=momentum)
"$CNNBENCH" "${common[@]}" "${ps[@]}" --num_batches=6 --train_dir="$tmp/ps-straight" \
  >"$tmp/ps1.out" 2>"$tmp/ps1.err" || fail "parameter_server straight: exit $?"
for half in 1 2; do
  "$CNNBENCH" "${common[@]}" "${ps[@]}" --num_batches=$((3 * half)) --train_dir="$tmp/ps-resumed" \
    >"$tmp/ps-half$half.out" 2>"$tmp/ps-half$half.err" || fail "parameter_server half $half: exit $?"
done
grep -q "resuming from .*(global step 3)" "$tmp/ps-half2.err" || fail "parameter_server: no resume"
diff <(losses "$tmp/ps1.out") <(cat <(losses "$tmp/ps-half1.out") <(losses "$tmp/ps-half2.out")) \
  >"$tmp/loss.diff" || fail "parameter_server: the losses differ: $(cat "$tmp/loss.diff")"
"$CHECKPOINT_COMPARE" 1e-6 "$tmp/ps-straight/model.ckpt-0000000006.safetensors" \
  "$tmp/ps-resumed/model.ckpt-0000000006.safetensors" >"$tmp/compare.out" \
  || fail "parameter_server: the final checkpoints differ: $(cat "$tmp/compare.out")"
grep -q '"optimizer.momentum_buffer.' "$tmp/ps-straight/model.ckpt-0000000006.safetensors" \
  || fail "parameter_server: no momentum in the checkpoint"
echo "parameter_server: 6 losses equal; $(cat "$tmp/compare.out")"

# The comparison can fail: the same resume from the step-10 checkpoint without its
# optimizer tensors (momentum restarting from zero) ends elsewhere.
mkdir "$tmp/no-slots"
"$CHECKPOINT_EDIT" drop optimizer. "$tmp/momentum-resumed/model.ckpt-0000000010.safetensors" \
  "$tmp/no-slots/model.ckpt-0000000010.safetensors" || fail "checkpoint_edit failed"
"$CNNBENCH" "${common[@]}" --optimizer=momentum --num_batches=20 --train_dir="$tmp/no-slots" \
  >"$tmp/no-slots.out" 2>"$tmp/no-slots.err" || fail "resume without slots: exit $?"
if "$CHECKPOINT_COMPARE" 1e-6 "$tmp/momentum-straight/model.ckpt-0000000020.safetensors" \
     "$tmp/no-slots/model.ckpt-0000000020.safetensors" >"$tmp/compare.out"; then
  fail "a resume that lost the momentum matched the straight run: the comparison cannot fail"
fi

# --eval --train_dir: evaluates the latest checkpoint (step 20), in inference mode.
"$CNNBENCH" --model=resnet20 --data_name=cifar10 --batch_size=4 --eval --num_batches=2 --num_intra_threads=1 \
  --num_warmup_batches=0 --train_dir="$tmp/momentum-resumed" >"$tmp/eval.out" 2>"$tmp/eval.err" \
  || fail "--eval --train_dir exit $?"
grep -q "evaluating .*model.ckpt-0000000020.safetensors (global step 20)" "$tmp/eval.err" \
  || fail "--eval did not load the latest checkpoint"
grep -qP '^Accuracy @ 1 = \d\.\d{4} Accuracy @ 5 = \d\.\d{4} \[8 examples\]$' "$tmp/eval.out" \
  || fail "--eval --train_dir: no accuracy line"
if "$CNNBENCH" --model=resnet20 --data_name=cifar10 --eval --num_batches=1 \
     --train_dir="$tmp/empty" >"$tmp/noeval.out" 2>"$tmp/noeval.err"; then
  fail "--eval with an empty --train_dir succeeded"
fi
grep -q "no checkpoint there to evaluate" "$tmp/noeval.err" || fail "--eval, empty dir: unclear message"

# Another model, another optimizer: refused, naming both, before any step.
if "$CNNBENCH" --model=resnet32 --data_name=cifar10 --batch_size=4 --num_batches=1 \
     --train_dir="$tmp/momentum-resumed" >"$tmp/model.out" 2>"$tmp/model.err"; then
  fail "resnet32 resumed from a resnet20 checkpoint"
fi
grep -q "is of model 'resnet20', this run's is 'resnet32'" "$tmp/model.err" || fail "wrong model: unclear message"
# (21: one step past the checkpoint, so the optimizer, not the count, is what is refused.)
if "$CNNBENCH" "${common[@]}" --optimizer=adam --num_batches=21 --train_dir="$tmp/momentum-resumed" \
     >"$tmp/opt.out" 2>"$tmp/opt.err"; then
  fail "adam resumed from a momentum checkpoint"
fi
grep -q "trained with --optimizer=momentum, this run asks for --optimizer=adam" "$tmp/opt.err" \
  || fail "wrong optimizer: unclear message"
# Nothing left to train: the step-20 checkpoint with --num_batches=20 (or fewer) is refused,
# exit 2, saying the count is the total; no step runs and no checkpoint is written.
set +e
"$CNNBENCH" "${common[@]}" --optimizer=momentum --num_batches=20 --train_dir="$tmp/momentum-resumed" \
  >"$tmp/done.out" 2>"$tmp/done.err"
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "a resume with nothing left to train: exit $rc, want 2"
grep -q -- "--num_batches=20 is 20 steps in all, and --train_dir's checkpoint is at global step 20 already" \
  "$tmp/done.err" || fail "nothing left to train: unclear message"
grep -q 'images/sec' "$tmp/done.out" && fail "nothing left to train, yet steps ran"
[ "$(ls "$tmp/momentum-resumed" | grep -c safetensors)" -eq 2 ] || fail "nothing left to train, yet a checkpoint was written"

# tf_cnn_benchmarks' train_and_eval count: 20 timed steps after 5 warm-up steps (global
# step 25), then --num_batches=40 resumed: 40 - 25 = 15 step lines.
tf=(--model=trivial --batch_size=2 --num_gpus=2 --num_warmup_batches=5 --display_every=1
    --optimizer=sgd --num_intra_threads=1 --train_dir="$tmp/tf")
"$CNNBENCH" "${tf[@]}" --num_batches=20 >"$tmp/tf1.out" 2>"$tmp/tf1.err" || fail "tf count, first run: exit $?"
"$CNNBENCH" "${tf[@]}" --num_batches=40 >"$tmp/tf2.out" 2>"$tmp/tf2.err" || fail "tf count, resumed: exit $?"
grep -q "resuming from .*(global step 25)" "$tmp/tf2.err" || fail "tf count: not resumed from global step 25"
[ "$(losses "$tmp/tf1.out" | wc -l)" -eq 20 ] || fail "tf count: 20 step lines expected first"
[ "$(losses "$tmp/tf2.out" | wc -l)" -eq 15 ] || fail "tf count: 15 step lines expected on resume (tf's train_and_eval)"
[ -f "$tmp/tf/model.ckpt-0000000045.safetensors" ] || fail "tf count: the resumed run should end at global step 45"
echo PASS
