#!/usr/bin/env bash
# The imagenet datasource on TFRecord shards written by cnnbench-mkrecords from a JPEG
# folder: the records read back as the folder did (labels 1-based, every image once),
# shards split between ranks by file or, with fewer files than shards, by record, read
# --datasets_parallel_interleave_cycle_length at a time as tf.data interleaves them, one
# example repeated (--datasets_repeat_cached_sample), the same stream from memory
# (--datasets_use_caching), a
# damaged record is skipped and named with its byte offset (cli/imagenet_damage.sh: what
# each kind of damage costs),
# and cnnbench trains on the shards.
set -euo pipefail
if [ -z "${MAKE_IMAGE_FOLDER:-}" ]; then
  echo "SKIP: the build has no JPEG component (libjpeg-turbo), so no imagenet datasource"; exit 77
fi
: "${CNNBENCH:?}" "${MAKE_IMAGE_FOLDER:?}" "${DATASOURCE_EPOCH:?}" "${MKRECORDS:?}"
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
out=$dir/out
fail() { echo "FAIL: $*"; echo "--- stdout"; cat "$out" 2>/dev/null; echo "--- stderr"; cat "$out.err" 2>/dev/null; exit 1; }

"$MAKE_IMAGE_FOLDER" "$dir/folder" train 4 12
"$MAKE_IMAGE_FOLDER" "$dir/folder" validation 4 3
"$MKRECORDS" --input_dir="$dir/folder/train" --output_dir="$dir/records" --name=train --num_shards=4 \
  >"$out" 2>"$out.err" || fail "mkrecords train: exit $?"
"$MKRECORDS" --input_dir="$dir/folder/validation" --output_dir="$dir/records" --name=validation \
  --num_shards=1 >"$out" 2>"$out.err" || fail "mkrecords validation: exit $?"
[ -f "$dir/records/train-00003-of-00004" ] && [ -f "$dir/records/validation-00000-of-00001" ] \
  || fail "shards not named as TensorFlow names them: $(ls "$dir/records")"
epoch() { "$DATASOURCE_EPOCH" --datasource=imagenet --image_size=24 --num_classes=5 \
            --distortions=false "$@"; }

# Validation: each image once, its label its class + 1 (mkrecords shuffles the order).
epoch --data_dir="$dir/records" --batch_size=4 --batches=3 >"$out" 2>"$out.err" || fail "eval: exit $?"
[ "$(grep -v skipped "$out" | awk '{print $3}' | sort -n | tr '\n' ' ')" = "$(seq 0 11 | tr '\n' ' ')" ] \
  || fail "validation records do not hold each image once"
grep -v skipped "$out" | awk '{ if ($2 != int($3 / 3) + 1) exit 1 }' || fail "a record's label does not match its image"

# tf's parallel_interleave: validation in 3 files of 4 records, read 1 at a time (file
# after file), 3 at a time (a record of each in turn) and 2 at a time (the third file
# takes the first free slot, then goes on alone).
"$MKRECORDS" --input_dir="$dir/folder/validation" --output_dir="$dir/three" --name=validation \
  --num_shards=3 >"$out" 2>"$out.err" || fail "mkrecords validation in 3: exit $?"
order() {
  epoch --data_dir="$dir/three" --batch_size=4 --batches=3 --datasets_parallel_interleave_cycle_length="$1" \
    2>"$out.err" | grep -v skipped | awk '{print $3}' | tr '\n' ' '
}
read -r -a one <<<"$(order 1)"
[ "${#one[@]}" = 12 ] || fail "interleave 1: ${one[*]}"
a=("${one[@]:0:4}") b=("${one[@]:4:4}") c=("${one[@]:8:4}")
want3="" want2=""
for i in 0 1 2 3; do want3+="${a[i]} ${b[i]} ${c[i]} "; want2+="${a[i]} ${b[i]} "; done
want2+="${c[*]} "
[ "$(order 3)" = "$want3" ] || fail "interleave 3: $(order 3), want $want3"
[ "$(order 2)" = "$want2" ] || fail "interleave 2: $(order 2), want $want2"
if epoch --data_dir="$dir/three" --batch_size=4 --batches=1 \
     --datasets_parallel_interleave_cycle_length=0 >"$out" 2>"$out.err"; then
  fail "an interleave of 0 accepted"
fi
grep -q "datasets_parallel_interleave_cycle_length=0" "$out.err" || fail "the bad interleave is not named"

# --datasets_repeat_cached_sample: one example, again and again (its augmentation anew).
epoch --data_dir="$dir/records" --train --batch_size=4 --batches=3 --datasets_repeat_cached_sample \
  --distortions >"$out" 2>"$out.err" || fail "repeat_cached_sample: exit $?"
[ "$(grep -v skipped "$out" | awk '{print $2}' | sort -u | wc -l)" = 1 ] || fail "more than one example repeated"
[ "$(grep -v skipped "$out" | wc -l)" = 12 ] || fail "not 12 examples"
# --datasets_use_caching: the same stream as from the files, epoch after epoch.
epoch --data_dir="$dir/records" --train --batch_size=4 --batches=30 --checksum >"$dir/files" 2>"$out.err"
epoch --data_dir="$dir/records" --train --batch_size=4 --batches=30 --checksum --datasets_use_caching \
  >"$dir/cached" 2>"$out.err" || fail "use_caching: exit $?"
cmp -s "$dir/files" "$dir/cached" || fail "--datasets_use_caching changed the stream"
# ... read from the files once: 30 batches of 4 are 2.5 epochs of 48 records.
shard_bytes=$(cat "$dir"/records/train-* | wc -c)
read_bytes() {
  epoch --data_dir="$dir/records" --train --batch_size=4 --batches=30 --read_bytes "$@" 2>&1 >/dev/null |
    sed -n 's/^read_bytes //p'
}
uncached=$(read_bytes) cached=$(read_bytes --datasets_use_caching)
[ "$uncached" -gt 0 ] && [ "$cached" -gt 0 ] || fail "no read counts: $uncached, $cached"
[ $((uncached - cached)) -ge "$shard_bytes" ] ||
  fail "--datasets_use_caching read $cached bytes, without it $uncached: not an epoch ($shard_bytes) less"

# Training on 4 files, 2 shards (by file), and on 1 file, 2 shards (by record): each image
# of the epoch exactly once across the shards.
for layout in 4 1; do
  src=$dir/records
  if [ "$layout" = 1 ]; then
    "$MKRECORDS" --input_dir="$dir/folder/train" --output_dir="$dir/one" --name=train --num_shards=1 \
      >/dev/null 2>&1 || fail "mkrecords one shard"
    src=$dir/one
  fi
  epoch --data_dir="$src" --train --shards=2 --batch_size=4 --batches=6 --shuffle_buffer_size=16 \
    >"$out" 2>"$out.err" || fail "train ($layout files): exit $?"
  ids=$(grep -v skipped "$out" | awk '{print $3}' | sort -n | tr '\n' ' ')
  [ "$ids" = "$(seq 0 47 | tr '\n' ' ')" ] || fail "$layout file(s), 2 shards: not each image once: $ids"
done

# A flipped byte inside the second record's data: that record is skipped, named with the
# file and the record's byte offset, and counted. (The
# validation shard: read in order, so every epoch meets the damage once.)
shard=$dir/records/validation-00000-of-00001
first_len=$(od -An -tu8 -N8 "$shard" | tr -d ' ')
offset=$((16 + first_len))           # the second record's header
printf '\xff' | dd of="$shard" bs=1 seek=$((offset + 20)) conv=notrunc status=none
epoch --data_dir="$dir/records" --batch_size=4 --batches=2 >"$out" 2>"$out.err" || fail "corrupt: exit $?"
grep -q "validation-00000-of-00001.*byte $offset" "$out.err" || fail "the damaged record is not named with its offset $offset"
grep -q "^skipped 0 [1-9]" "$out" || fail "the damaged record is not counted"

# cnnbench trains on the shards and names the datasource's layout in its log.
"$CNNBENCH" --model=trivial --data_dir="$dir/records" --num_classes=5 --batch_size=4 \
  --num_batches=5 --num_warmup_batches=1 >"$out" 2>"$out.err" || fail "cnnbench: exit $?"
grep -q "TFRecord shards" "$out.err" || fail "the log does not say shards were read"
grep -qP '^total images/sec: \d+' "$out" || fail "no total"
echo "PASS"
