#!/usr/bin/env bash
# Several replicas in one process (--num_gpus=2 on the cpu device, independent strategy):
# - the report counts both, and replica 0 trains exactly as a single replica would (same
#   initial weights, same batch: independent replicas never exchange gradients): the
#   final checkpoints, which keep replica 0's, are equal;
# - the step line's loss and accuracies are over every replica, as tf_cnn_benchmarks
#   averages its towers: 2 replicas' --forward_only step line shows the accuracies --eval's
#   accuracy line counts over the same first batches of both replicas (synthetic data
#   gives each replica its own labels, so replica 0's alone differ), and the 2-replica
#   training loss is not replica 0's.
set -euo pipefail
: "${CNNBENCH:?}" "${CHECKPOINT_COMPARE:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; for f in "$tmp"/*.out; do echo "--- $f"; cat "$f"; done; exit 1; }
args=(--model=lenet --batch_size=4 --num_batches=5 --num_warmup_batches=0 --display_every=1
      --optimizer=momentum --init_learning_rate=0.01 --num_intra_threads=1)
"$CNNBENCH" "${args[@]}" --train_dir="$tmp/one" >"$tmp/one.out" 2>/dev/null || fail "1 replica: exit $?"
"$CNNBENCH" "${args[@]}" --num_gpus=2 --variable_update=independent --train_dir="$tmp/two" >"$tmp/two.out" 2>/dev/null || fail "2 replicas: exit $?"
grep -q "Devices:     \['/cpu:0', '/cpu:1'\]" "$tmp/two.out" || fail "devices line"
grep -q "Batch size:  8 global" "$tmp/two.out" || fail "global batch"
"$CHECKPOINT_COMPARE" 1e-6 "$tmp/one/model.ckpt-0000000005.safetensors" \
  "$tmp/two/model.ckpt-0000000005.safetensors" >"$tmp/compare.out" \
  || fail "replica 0 differs from a single replica: $(cat "$tmp/compare.out")"
losses() { awk -F'\t' '/^[0-9]+\t/ {print $3}' "$1" | tr '\n' ' '; }
[ "$(losses "$tmp/one.out")" != "$(losses "$tmp/two.out")" ] \
  || fail "the 2-replica step lines show replica 0's loss alone: $(losses "$tmp/two.out")"
echo "ok: replica 0 trains as one replica; the step lines' loss is over both ($(losses "$tmp/two.out"))"

# The same batches seen by --forward_only's step line and --eval's accuracy line.
same=(--model=trivial --batch_size=4 --num_gpus=2 --variable_update=independent --num_batches=1 --num_warmup_batches=0
      --display_every=1 --num_intra_threads=1)
"$CNNBENCH" "${same[@]}" --forward_only >"$tmp/fwd.out" 2>/dev/null || fail "--forward_only: exit $?"
"$CNNBENCH" "${same[@]}" --eval --eval_random_weights >"$tmp/eval.out" 2>/dev/null || fail "--eval: exit $?"
step=$(awk -F'\t' '$1 == 1 {print $4, $5}' "$tmp/fwd.out")
eval=$(sed -nE 's/^Accuracy @ 1 = ([0-9.]+) Accuracy @ 5 = ([0-9.]+) \[8 examples\]$/\1 \2/p' "$tmp/eval.out")
[ -n "$step" ] && [ -n "$eval" ] || fail "no step line or accuracy line"
awk -v s="$step" -v e="$eval" 'BEGIN { split(s, a, " "); split(e, b, " ");
  exit !(sprintf("%.3f %.3f", b[1], b[2]) == sprintf("%.3f %.3f", a[1], a[2])) }' \
  || fail "--forward_only's step line says $step, --eval over the same 8 examples $eval"
echo "PASS: accuracies over both replicas: step line $step, --eval $eval"
