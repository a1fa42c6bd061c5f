#!/usr/bin/env bash
# End to end through the CLI: the trivial model on the cpu device with synthetic data
# prints tf_cnn_benchmarks' report, and its loss falls over 20 steps (labels are fixed).
set -euo pipefail
: "${CNNBENCH:?}"
out=$(mktemp); trap 'rm -f "$out" "$out.err"' EXIT
fail() { echo "FAIL: $*"; echo "--- stdout"; cat "$out"; echo "--- stderr"; cat "$out.err"; exit 1; }

"$CNNBENCH" --model=trivial --batch_size=8 --num_batches=20 --num_warmup_batches=0 \
  --display_every=1 --optimizer=momentum --init_learning_rate=0.01 >"$out" 2>"$out.err" \
  || fail "exit code $?"

for line in 'Model:       trivial' 'Dataset:     imagenet (synthetic)' 'Mode:        training' \
            'Batch size:  8 global' '             8 per device' 'Num batches: 20' \
            "Devices:     \['/cpu:0'\]" 'Optimizer:   momentum' 'Variables:   independent' \
            '^==========$' $'^Step\tImg/sec\ttotal_loss$'; do
  grep -q -- "$line" "$out" || fail "missing header line: $line"
done
steps=$(grep -cP '^\d+\timages/sec: \d+\.\d \+/- \d+\.\d \(jitter = \d+\.\d\)\t\d+\.\d{3}$' "$out") || true
[ "$steps" -eq 20 ] || fail "expected 20 step lines, got $steps"
grep -qP '^total images/sec: \d+\.\d\d$' "$out" || fail "no total images/sec line"
[ "$(grep -c '^-\{64\}$' "$out")" -eq 2 ] || fail "total line is not framed by dashes"
grep -q 'Running warm up' "$out.err" || fail "progress logs should go to stderr"

first=$(awk -F'\t' '$1 == 1 {print $3}' "$out")
last=$(awk -F'\t' '$1 == 20 {print $3}' "$out")
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < 0.8 * a) }' \
  || fail "loss did not fall: step 1 $first, step 20 $last"
echo "PASS: loss $first -> $last over 20 steps"
