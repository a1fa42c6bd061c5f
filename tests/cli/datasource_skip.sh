#!/usr/bin/env bash
# A datasource continues a resumed run's stream (cnnb.datasource.skip/1): read straight
# from the plugin, the examples an instance delivers after skipping N batches are those
# an unskipped instance delivers from batch N on: same labels, same images, same pixels
# after augmentation (a hash of each example's floats), on every shard. For the imagenet
# datasource on a JPEG folder and on TFRecord shards (4 files: sharding by file; 3
# files of unequal size: a shard's epoch changes size with the file order; 1 file:
# sharding by record), with the training shuffle (and shuffle buffer), 1 and 2 shards,
# 2 or all of the files read at once (tf's interleave), from the files or the cache,
# N inside the first epoch and N spanning several; for cifar10 the same. Skipping one
# batch more or less gives other examples (the comparison can fail), and a skip past a
# hundred million epochs is computed, not walked.
set -euo pipefail
: "${DATASOURCE_EPOCH:?}" "${MAKE_CIFAR:?}"
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
out=$dir/out
# On stderr: fail may be called from a reader whose stdout goes into one of those files.
fail() { { echo "FAIL: $*"; for f in "$dir"/*.txt "$out.err"; do [ -f "$f" ] && { echo "--- $f"; cat "$f"; }; done; } >&2; exit 1; }

# batches ARGS...: the examples' lines (shard label id checksum), without the stats line.
batches() {
  "$DATASOURCE_EPOCH" --train --checksum "$@" 2>"$out.err" >"$dir/raw" || fail "exit $? ($*)"
  grep -v '^skipped' "$dir/raw" || true
}
# same_after_skip N BATCH ARGS...: skipping N batches continues the unskipped stream.
same_after_skip() {
  local n=$1 batch=$2 more=6; shift 2
  batches --batch_size="$batch" --batches=$((n + more)) "$@" |
    awk -v k=$((n * batch)) '{ if (++seen[$1] > k) print }' >"$dir/ref.txt"
  batches --batch_size="$batch" --batches=$more --skip_batches="$n" "$@" >"$dir/got.txt"
  [ "$(wc -l <"$dir/ref.txt")" -gt 0 ] || fail "no examples read ($*)"
  diff "$dir/ref.txt" "$dir/got.txt" >/dev/null || fail "skip $n batches of $batch: not the stream from batch $n on ($*)"
}
# differs_after_skip N BATCH ARGS...: skipping N - 1 or N + 1 batches does not.
differs_after_skip() {
  local n=$1 batch=$2; shift 2
  same_after_skip "$n" "$batch" "$@"
  for wrong in $((n - 1)) $((n + 1)); do
    batches --batch_size="$batch" --batches=6 --skip_batches="$wrong" "$@" >"$dir/wrong.txt"
    if diff -q "$dir/ref.txt" "$dir/wrong.txt" >/dev/null; then
      fail "skipping $wrong batches gives what skipping $n does: the comparison cannot fail ($*)"
    fi
  done
}

if [ -n "${MAKE_IMAGE_FOLDER:-}" ] && [ -n "${MKRECORDS:-}" ]; then
  # 20 images (4 classes of 5), batches of 3: an epoch is under 7 batches of one shard.
  "$MAKE_IMAGE_FOLDER" "$dir/folder" train 4 5
  for files in 4 3 1; do
    "$MKRECORDS" --input_dir="$dir/folder/train" --output_dir="$dir/records$files" --name=train \
      --num_shards=$files >"$out" 2>"$out.err" || fail "mkrecords $files: exit $?"
  done
  imagenet=(--datasource=imagenet --image_size=16 --num_classes=5 --distortions=true
            --datasets_num_private_threads=2 --num_intra_threads=1)
  for shards in 1 2; do
    for n in 2 23; do
      same_after_skip $n 3 "${imagenet[@]}" --data_dir="$dir/folder" --shards=$shards
      for files in 4 3 1; do
        for buffer in 1 8; do
          same_after_skip $n 3 "${imagenet[@]}" --data_dir="$dir/records$files" --shards=$shards \
            --shuffle_buffer_size=$buffer
        done
      done
    done
  done
  # Two shards read at once (tf's interleave; the default 10 holds every file above): a
  # file that ends gives its slot to the next; and the same from the cache.
  for files in 4 3; do
    for n in 2 23; do
      same_after_skip $n 3 "${imagenet[@]}" --data_dir="$dir/records$files" --shards=2 \
        --shuffle_buffer_size=8 --datasets_parallel_interleave_cycle_length=2
    done
  done
  same_after_skip 23 3 "${imagenet[@]}" --data_dir="$dir/records3" --shards=1 --datasets_use_caching
  same_after_skip 23 3 "${imagenet[@]}" --data_dir="$dir/folder" --shards=2 --datasets_use_caching
  differs_after_skip 5 3 "${imagenet[@]}" --data_dir="$dir/records3" --shards=1 \
    --datasets_parallel_interleave_cycle_length=2
  differs_after_skip 5 3 "${imagenet[@]}" --data_dir="$dir/folder" --shards=2
  differs_after_skip 5 3 "${imagenet[@]}" --data_dir="$dir/records4" --shards=2 --shuffle_buffer_size=8
  differs_after_skip 5 3 "${imagenet[@]}" --data_dir="$dir/records1" --shards=2 --shuffle_buffer_size=8
  echo "imagenet: folder and shards continue their streams"

  # 10^9 batches of 3 = 1.5 * 10^8 epochs of a shard's 10 images: computed at once.
  batches "${imagenet[@]}" --data_dir="$dir/folder" --shards=2 --batch_size=3 --batches=1 \
    --skip_batches=1000000000 >"$dir/far.txt"
  grep -q "continues after 1000000000 batches (3000000000 examples), in epoch 300000000 " "$out.err" \
    || fail "a skip of 10^9 batches did not land in epoch 3 * 10^8"
else
  echo "no JPEG component (libjpeg-turbo) in this build: the imagenet cases are skipped"
fi

# cifar10: 320 training examples, batches of 16: 20 batches an epoch for one shard.
mkdir "$dir/cifar"
"$MAKE_CIFAR" "$dir/cifar" 64 7
cifar=(--datasource=cifar10 --data_name=cifar10 --data_dir="$dir/cifar" --image_size=32
       --num_classes=10)
for shards in 1 2; do
  for n in 3 50; do same_after_skip $n 16 "${cifar[@]}" --shards=$shards; done
done
differs_after_skip 7 16 "${cifar[@]}" --shards=2
echo "cifar10: continues its order"
echo PASS
