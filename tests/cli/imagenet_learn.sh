#!/usr/bin/env bash
# A small model learns a small real dataset through the imagenet datasource: JPEGs whose
# class is their blue level (red and green random per image, so nothing else gives the
# class away), lenet trained 60 steps with tf_cnn_benchmarks' preprocessing, evaluated on
# the validation split every 20 steps: top-1 ends far above chance (1 in 4). The same
# run with fp32 batches (the cpu device normalizes uint8 ones by default) learns alike,
# and two MPI ranks each read their own half.
set -euo pipefail
if [ -z "${MAKE_IMAGE_FOLDER:-}" ]; then
  echo "SKIP: the build has no JPEG component (libjpeg-turbo), so no imagenet datasource"; exit 77
fi
: "${CNNBENCH:?}" "${CNNB_SOURCE_DIR:?}"
source "$CNNB_SOURCE_DIR/tests/support/eval_lines.sh"
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
out=$dir/out
fail() { echo "FAIL: $*"; echo "--- stdout"; cat "$out" 2>/dev/null; echo "--- stderr"; cat "$out.err" 2>/dev/null; exit 1; }

"$MAKE_IMAGE_FOLDER" "$dir/data" train 4 40 0 random
"$MAKE_IMAGE_FOLDER" "$dir/data" validation 4 10 0 random
learn() {
  "$CNNBENCH" --model=lenet --data_dir="$dir/data" --num_classes=5 --batch_size=16 \
    --num_batches=60 --num_warmup_batches=0 --display_every=20 --optimizer=momentum \
    --init_learning_rate=0.01 --distortions=false --eval_during_training_every_n_steps=20 "$@" \
    >"$out" 2>"$out.err" || fail "exit $? ($*)"
  grep -q "JPEG folder" "$out.err" || fail "the imagenet datasource did not read the folder"
  final=$(eval_lines "$out" | grep -oP '^Step 60: Accuracy @ 1 = \K[0-9.]+') || fail "no evaluation at step 60"
  awk -v a="$final" 'BEGIN { exit !(a >= 0.9) }' || fail "top-1 $final after 60 steps (chance 0.25) ($*)"
  echo "top-1 $final ($*)"
}
learn --input_dtype=auto
learn --input_dtype=float32

# Two ranks (horovod): each reads a disjoint half of every epoch (the sharding itself is
# checked image by image in cli_imagenet_folder), and training works across them.
source "$CNNB_SOURCE_DIR/tests/support/mpi.sh"
mpi_require horovod
mpi_run_bounded 180 2 "$CNNBENCH" --model=lenet --data_dir="$dir/data" --num_classes=5 --batch_size=8 \
  --num_batches=10 --num_warmup_batches=1 --variable_update=horovod --distortions=false \
  >"$out" 2>"$out.err" || fail "2 ranks: exit $?"
grep -q "shard 1 of 2" "$out.err" || fail "rank 1 did not read shard 1 of 2"
grep -qP '^total images/sec: \d+' "$out" || fail "2 ranks: no total"
echo "PASS"
