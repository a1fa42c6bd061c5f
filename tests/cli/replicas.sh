#!/usr/bin/env bash
# Several replicas in one process (--num_gpus=2 on the cpu device, independent strategy):
# the report counts both, and replica 0 trains exactly as a single replica would (same
# initial weights, same batch: independent replicas never exchange gradients).
set -euo pipefail
: "${CNNBENCH:?}"
args=(--model=lenet --batch_size=4 --num_batches=5 --num_warmup_batches=0 --display_every=1
      --optimizer=momentum --init_learning_rate=0.01 --num_intra_threads=1)
one=$("$CNNBENCH" "${args[@]}" 2>/dev/null)
two=$("$CNNBENCH" "${args[@]}" --num_gpus=2 --variable_update=independent 2>/dev/null)
grep -q "Devices:     \['/cpu:0', '/cpu:1'\]" <<<"$two" || { echo "FAIL: devices line"; echo "$two"; exit 1; }
grep -q "Batch size:  8 global" <<<"$two" || { echo "FAIL: global batch"; echo "$two"; exit 1; }
losses() { awk -F'\t' '/^[0-9]+\t/ {print $3}' <<<"$1" | tr '\n' ' '; }
[ "$(losses "$one")" = "$(losses "$two")" ] \
  || { echo "FAIL: replica 0 differs from a single replica: $(losses "$one") vs $(losses "$two")"; exit 1; }
echo "PASS: losses $(losses "$two")"
