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
            "Devices:     \['/cpu:0'\]" 'Optimizer:   momentum' 'Variables:   parameter_server' \
            '^==========$' $'^Step\tImg/sec\ttotal_loss$'; do
  grep -q -- "$line" "$out" || fail "missing header line: $line"
done
steps=$(grep -cP '^\d+\timages/sec: \d+\.\d \+/- \d+\.\d \(jitter = \d+\.\d\)\t\d+\.\d{3}$' "$out") || true
[ "$steps" -eq 20 ] || fail "expected 20 step lines, got $steps"
grep -qP '^total images/sec: \d+\.\d\d$' "$out" || fail "no total images/sec line"
[ "$(grep -c '^-\{64\}$' "$out")" -eq 2 ] || fail "total line is not framed by dashes"
# tf_cnn_benchmarks' progress lines, on stdout where it prints them, between the header
# and the step lines.
progress=$(sed -n '/^==========$/,/^Step\t/p' "$out" | tr '\n' '|')
[ "$progress" = $'==========|Generating training model|Initializing graph|Running warm up|Done warm up|Step\tImg/sec\ttotal_loss|' ] \
  || fail "progress lines: $progress"
grep -q 'Running warm up' "$out.err" && fail "progress lines went to stderr too"

# trivial squeezes every image through one unit, so it learns slowly: the loss must fall
# at every fifth step and by a clear margin overall, not by a fixed fraction.
losses=$(awk -F'\t' '$1 % 5 == 0 || $1 == 1 {print $3}' "$out" | tr '\n' ' ')
first=$(awk -F'\t' '$1 == 1 {print $3}' "$out")
last=$(awk -F'\t' '$1 == 20 {print $3}' "$out")
awk -v l="$losses" 'BEGIN { n = split(l, v, " "); for (i = 2; i <= n; i++) if (v[i] >= v[i-1]) exit 1 }' \
  || fail "loss did not fall at every fifth step: $losses"
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.1) }' \
  || fail "loss did not fall enough: step 1 $first, step 20 $last"
echo "PASS: loss $first -> $last over 20 steps"
