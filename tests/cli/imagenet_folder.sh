#!/usr/bin/env bash
# The imagenet datasource on a JPEG folder (torchvision's ImageFolder) the test writes:
# what reaches the model is the right image with the right label, shards of one epoch
# are disjoint and cover the split, order and augmentation repeat for a seed whatever the
# decoder thread count, tf's YIQ and HSV colour distortions and its unfused decode, bad files are skipped, named and counted, and a wrong --data_dir
# says what was looked for.
set -euo pipefail
if [ -z "${MAKE_IMAGE_FOLDER:-}" ]; then
  echo "SKIP: the build has no JPEG component (libjpeg-turbo), so no imagenet datasource"; exit 77
fi
: "${CNNBENCH:?}" "${MAKE_IMAGE_FOLDER:?}" "${DATASOURCE_EPOCH:?}"
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
out=$dir/out
fail() { echo "FAIL: $*"; echo "--- stdout"; cat "$out" 2>/dev/null; echo "--- stderr"; cat "$out.err" 2>/dev/null; exit 1; }

# 4 classes x 12 images; validation 4 x 3.
"$MAKE_IMAGE_FOLDER" "$dir/data" train 4 12
"$MAKE_IMAGE_FOLDER" "$dir/data" validation 4 3
epoch() { "$DATASOURCE_EPOCH" --datasource=imagenet --data_dir="$dir/data" --image_size=24 \
            --num_classes=5 --distortions=false "$@"; }

# Evaluation: every image once, labels 1-based (ImageNet's label 0 is unused), in order.
epoch --batch_size=4 --batches=3 >"$out" 2>"$out.err" || fail "eval epoch: exit $?"
expected=$(for c in 0 1 2 3; do for i in 0 1 2; do echo "0 $((c + 1)) $((c * 3 + i))"; done; done)
[ "$(grep -v skipped "$out")" = "$expected" ] || fail "eval order/labels/images differ from the folder"

# Training, 2 shards x one epoch each (48 images = 2 x 6 batches of 4): disjoint, and
# together every image exactly once, each with its class's label.
epoch --train --shards=2 --batch_size=4 --batches=6 >"$out" 2>"$out.err" || fail "train: exit $?"
ids=$(grep -v skipped "$out" | awk '{print $3}' | sort -n | tr '\n' ' ')
[ "$ids" = "$(seq 0 47 | tr '\n' ' ')" ] || fail "shards of an epoch do not cover each image once: $ids"
grep -v skipped "$out" | awk '{ if ($2 != int($3 / 12) + 1) exit 1 }' || fail "a label does not match its image"
[ "$(awk '$1 == 0' "$out" | grep -vc skipped)" = 24 ] || fail "shard 0 did not read half"
# Shuffled: the training order is not the folder order.
[ "$(grep -v skipped "$out" | awk '$1 == 0 {print $3}' | head -24 | tr '\n' ' ')" != \
  "$(seq 0 2 46 | tr '\n' ' ')" ] || fail "training order is not shuffled"

# The same seed gives the same batches with 1 or 3 decoder threads; another seed does not.
epoch --train --batch_size=8 --batches=8 --datasets_num_private_threads=1 --distortions=true >"$dir/a"
epoch --train --batch_size=8 --batches=8 --datasets_num_private_threads=3 --distortions=true >"$dir/b"
epoch --train --batch_size=8 --batches=8 --datasets_num_private_threads=3 --seed=7 >"$dir/c"
cmp -s "$dir/a" "$dir/b" || fail "order depends on the decoder thread count"
! cmp -s "$dir/a" "$dir/c" || fail "--seed does not change the order"

# tf's two colour distortions: YIQ (its default) and HSV give other pixels (so other ids,
# read off the colours), the same examples in the same order (labels); without --distortions the choice changes nothing. Unfused decoding reads the
# same examples (its pixels differ only on the crop's edges, by libjpeg's upsampling).
sums() { epoch --train --batch_size=8 --batches=2 --checksum "$@"; }
sums --distortions >"$dir/yiq" || fail "yiq distortions: exit $?"
sums --distortions --nodistort_color_in_yiq >"$dir/hsv" || fail "hsv distortions: exit $?"
sums >"$dir/plain"
sums --nodistort_color_in_yiq >"$dir/plain2"
sums --nofuse_decode_and_crop >"$dir/unfused" || fail "--nofuse_decode_and_crop: exit $?"
[ "$(cut -d' ' -f1-2 "$dir/yiq")" = "$(cut -d' ' -f1-2 "$dir/hsv")" ] || fail "yiq/hsv: other examples"
[ "$(cut -d' ' -f4 "$dir/yiq" | sort -u | wc -l)" -gt 1 ] || fail "no checksum column"
[ -z "$(paste -d' ' "$dir/yiq" "$dir/hsv" | awk '$4 == $8')" ] ||
  fail "an example has the same pixels with YIQ and HSV distortions"
cmp -s "$dir/plain" "$dir/plain2" || fail "--nodistort_color_in_yiq changed undistorted pixels"
[ "$(cut -d' ' -f1-3 "$dir/plain")" = "$(cut -d' ' -f1-3 "$dir/unfused")" ] ||
  fail "--nofuse_decode_and_crop read other examples"

# Bad files: 3 damaged JPEGs and a PNG in class 0. Skipped, named, counted; the PNG is
# not read (said when no JPEG is there at all).
# (The validation split: read in order, so exactly the 3 damaged files come before the
# 12 good ones of 3 batches.)
"$MAKE_IMAGE_FOLDER" "$dir/bad" train 2 6 3
"$MAKE_IMAGE_FOLDER" "$dir/bad" validation 2 6 3
"$DATASOURCE_EPOCH" --datasource=imagenet --data_dir="$dir/bad" --image_size=24 --num_classes=5 \
  --batch_size=4 --batches=3 >"$out" 2>"$out.err" || fail "bad files: exit $?"
grep -q "^skipped 0 3$" "$out" || fail "expected 3 skipped examples"
grep -q "bad000.JPEG" "$out.err" || fail "the truncated file is not named"
grep -q "bad001.JPEG.*empty" "$out.err" || fail "the empty file is not named"
[ "$(grep -v skipped "$out" | wc -l)" = 12 ] || fail "the batches are not full"
grep -v skipped "$out" | awk '{ if ($3 >= 12) exit 1 }' || fail "a damaged file produced an image"

# Through cnnbench: the skipped count is in the report; a limit turns it into an error.
"$CNNBENCH" --model=trivial --data_dir="$dir/bad" --num_classes=5 \
  --batch_size=4 --num_batches=4 --num_warmup_batches=0 >"$out" 2>"$out.err" || fail "cnnbench on bad data: exit $?"
grep -q "Dataset:     imagenet (imagenet)" "$out" || fail "the imagenet datasource was not picked"
# (How many depends on how far the prefetch queue read ahead when the report was made.)
grep -qP "^skipped [1-9]\d* unreadable examples" "$out" || fail "the report does not count the skipped files"
if "$CNNBENCH" --model=trivial --data_dir="$dir/bad" --num_classes=5 \
     --batch_size=4 --num_batches=4 --max_skipped_examples=1 >"$out" 2>"$out.err"; then
  fail "--max_skipped_examples=1 did not stop the run"
fi
grep -q "max_skipped_examples=1" "$out.err" || fail "the limit's error does not name the flag"

# --datasets_use_caching on a folder: the same stream, each image read from disk once
# (30 batches of 4 are 2.5 epochs of 48 images).
sums --batches=30 >"$dir/disk"
sums --batches=30 --datasets_use_caching >"$dir/memory" || fail "use_caching: exit $?"
cmp -s "$dir/disk" "$dir/memory" || fail "--datasets_use_caching changed the folder's stream"
folder_bytes=$(cat "$dir"/data/train/*/* | wc -c)
read_bytes() { sums --batches=30 --read_bytes "$@" 2>&1 >/dev/null | sed -n 's/^read_bytes //p'; }
uncached=$(read_bytes) cached=$(read_bytes --datasets_use_caching)
[ $((uncached - cached)) -ge "$folder_bytes" ] ||
  fail "--datasets_use_caching read $cached bytes, without it $uncached: not an epoch ($folder_bytes) less"
# The interleave of TFRecord shards means nothing for a folder: said once.
epoch --train --batch_size=4 --batches=1 --datasets_parallel_interleave_cycle_length=4 >/dev/null \
  2>"$out.err" || fail "interleave on a folder: exit $?"
[ "$(grep -c "datasets_parallel_interleave_cycle_length=4 has no effect" "$out.err")" = 1 ] ||
  fail "no single warning for an interleave on a folder"

# Read ahead or not (--nodatasets_use_prefetch, --datasets_prefetch_buffer_size): the same
# batches in the same order, so the same losses; a depth of 0 is refused.
losses() {
  "$CNNBENCH" --model=trivial --data_dir="$dir/data" --num_classes=5 --batch_size=4 \
    --num_batches=6 --num_warmup_batches=0 --display_every=1 "$@" 2>"$out.err" |
    awk '$1 ~ /^[0-9]+$/ && /images\/sec/ {print $1, $NF}'
}
ahead=$(losses) || fail "prefetch default: exit $?"
[ "$(echo "$ahead" | wc -l)" = 6 ] || fail "expected 6 step lines: $ahead"
[ "$(losses --nodatasets_use_prefetch)" = "$ahead" ] || fail "--nodatasets_use_prefetch changed the losses"
[ "$(losses --datasets_prefetch_buffer_size=7)" = "$ahead" ] || fail "a deeper prefetch changed the losses"
if "$CNNBENCH" --model=trivial --data_dir="$dir/data" --num_classes=5 \
     --datasets_prefetch_buffer_size=0 >"$out" 2>"$out.err"; then fail "a prefetch depth of 0 accepted"; fi
grep -q "datasets_prefetch_buffer_size=0" "$out.err" || fail "the bad depth is not named"

# A --data_dir without data names what it looked for; a missing one says so.
mkdir -p "$dir/empty"
if "$CNNBENCH" --model=trivial --data_dir="$dir/empty" >"$out" 2>"$out.err"; then fail "empty dir accepted"; fi
grep -q "train-\*-of-\*" "$out.err" && grep -q "ImageFolder" "$out.err" || fail "no layouts named"
if "$CNNBENCH" --model=trivial --data_dir="$dir/missing" >"$out" 2>"$out.err"; then fail "missing dir accepted"; fi
grep -q "No such file or directory" "$out.err" || fail "a missing --data_dir is not named"
# Only PNGs: said so.
mkdir -p "$dir/png/train/a" && printf '\x89PNG\r\n\x1a\n' >"$dir/png/train/a/x.png"
if "$CNNBENCH" --model=trivial --data_dir="$dir/png" >"$out" 2>"$out.err"; then fail "PNG-only dir accepted"; fi
grep -q "PNG files are not read" "$out.err" || fail "PNG-only folder not explained"
# More class folders than the model has classes.
if "$CNNBENCH" --model=trivial --data_dir="$dir/data" --num_classes=3 >"$out" 2>"$out.err"; then
  fail "4 class folders accepted for 3 classes"
fi
grep -q "4 class folders" "$out.err" || fail "the class count is not explained"
echo "PASS"
