#!/usr/bin/env bash
# What damaged or incomplete data costs the imagenet datasource, counted exactly:
# - a record whose data fails its CRC (its length's CRC intact) is skipped alone, and the
#   rest of its shard is read (it used to drop the rest: 1 of 56 examples read);
# - a lost framing (a length failing its CRC) names the bytes not read and about how many
#   records they held; the banner counts only what can be read, and a summary sums it;
# - a shard set whose names show a shard missing (one deleted; two renamed -of-00005) is
#   refused naming the missing ones, or read with a warning under --allow_missing_shards;
# - "nothing here can be read" counts distinct examples: 40 empty and 2 good JPEGs train
#   at every --seed (the old count of examples in a row stopped --seed=1 here), a
#   folder of only empty files still stops;
# - a JPEG the process may not open (EACCES, as user nobody) is skipped and counted.
set -euo pipefail
if [ -z "${MAKE_IMAGE_FOLDER:-}" ]; then
  echo "SKIP: the build has no JPEG component (libjpeg-turbo), so no imagenet datasource"; exit 77
fi
: "${CNNBENCH:?}" "${MAKE_IMAGE_FOLDER:?}" "${DATASOURCE_EPOCH:?}" "${MKRECORDS:?}" "${MAKE_JPEG:?}"
dir=$(mktemp -d); trap 'chmod -R u+rwX "$dir"; rm -rf "$dir"' EXIT
out=$dir/out
fail() { echo "FAIL: $*"; echo "--- stdout"; cat "$out" 2>/dev/null; echo "--- stderr"; cat "$out.err" 2>/dev/null; exit 1; }
epoch() { "$DATASOURCE_EPOCH" --datasource=imagenet --image_size=24 --num_classes=5 \
            --distortions=false "$@"; }
records() { # DIR NAME SHARDS: the test's 56 images as TFRecord shards
  "$MKRECORDS" --input_dir="$dir/folder/validation" --output_dir="$1" --name="$2" \
    --num_shards="$3" >/dev/null 2>&1 || fail "mkrecords $1"
}
"$MAKE_IMAGE_FOLDER" "$dir/folder" validation 4 14

# A flipped byte in the data of record 0: that record is skipped, the other 55 are read.
records "$dir/flip" validation 1
shard=$dir/flip/validation-00000-of-00001
printf '\xff' | dd of="$shard" bs=1 seek=20 conv=notrunc status=none
epoch --data_dir="$dir/flip" --batch_size=5 --batches=11 >"$out" 2>"$out.err" || fail "data CRC: exit $?"
grep -q "validation-00000-of-00001: record at byte 0: data CRC mismatch" "$out.err" \
  || fail "the record failing its data CRC is not named with its offset"
grep -q "^skipped 0 1$" "$out" || fail "not exactly the one damaged record skipped"
[ "$(grep -v skipped "$out" | awk '{print $3}' | sort -un | wc -l)" = 55 ] \
  || fail "the 55 records after the damaged one are not each read"
grep -q "56 examples, shard 0" "$out.err" || fail "the banner does not count the 56 records"

# A flipped byte in the length of record 2: framing lost, the bytes not read are counted.
records "$dir/frame" validation 1
shard=$dir/frame/validation-00000-of-00001
off=0
for _ in 1 2; do off=$((off + 16 + $(od -An -tu8 -N8 -j"$off" "$shard" | tr -d ' '))); done
size=$(stat -c %s "$shard")
printf '\xff' | dd of="$shard" bs=1 seek=$((off + 2)) conv=notrunc status=none
epoch --data_dir="$dir/frame" --batch_size=2 --batches=3 >"$out" 2>"$out.err" || fail "framing: exit $?"
grep -q "record at byte $off: length CRC mismatch.*framing lost, the rest of the file is not read: $((size - off)) of its $size bytes (about [0-9]* records at the average size of the 2 before)" \
  "$out.err" || fail "the lost framing does not count the $((size - off)) bytes after byte $off"
grep -q "2 examples (1 of the 1 files lose their framing" "$out.err" \
  || fail "the banner does not count only the 2 records that can be read"
grep -q "damaged file tails were met.* bytes not read, about [0-9]* records" "$out.err" \
  || fail "no summary of what the lost framing cost"

# Shard sets with a member missing: refused naming it, or read with a warning.
records "$dir/gap" train 4
rm "$dir/gap/train-00001-of-00004"
train() { "$CNNBENCH" --model=trivial --num_classes=5 --batch_size=4 --num_batches=2 \
            --num_warmup_batches=0 "$@"; }
if train --data_dir="$dir/gap" >"$out" 2>"$out.err"; then fail "a set missing a shard trained"; fi
grep -q "1 of the 4 shards train-\*-of-00004 is missing: train-00001-of-00004 (--allow_missing_shards" \
  "$out.err" || fail "the missing shard is not named"
train --data_dir="$dir/gap" --allow_missing_shards >"$out" 2>"$out.err" || fail "--allow_missing_shards: exit $?"
grep -q "warning.*train-00001-of-00004; reading the 3 that are there" "$out.err" \
  || fail "--allow_missing_shards gives no warning naming the missing shard"
records "$dir/renamed" train 2
for f in "$dir"/renamed/train-*; do mv "$f" "${f%-of-00002}-of-00005"; done
if train --data_dir="$dir/renamed" >"$out" 2>"$out.err"; then fail "2 shards named -of-00005 trained"; fi
grep -q "3 of the 5 shards .* are missing: train-00002-of-00005, train-00003-of-00005, train-00004-of-00005" \
  "$out.err" || fail "the shards the names promise are not named"

# 40 empty and 2 good JPEGs: every seed trains; only empty files stop the run.
mkdir -p "$dir/empties/train/a" "$dir/none/train/a"
for i in $(seq -w 0 39); do : >"$dir/empties/train/a/e$i.jpg"; : >"$dir/none/train/a/e$i.jpg"; done
"$MAKE_JPEG" "$dir/empties/train/a/g0.jpg" 32 32 1 && "$MAKE_JPEG" "$dir/empties/train/a/g1.jpg" 32 32 2
for seed in 1 2; do
  train --data_dir="$dir/empties" --batch_size=2 --num_batches=6 --seed=$seed >"$out" 2>"$out.err" \
    || fail "40 empty and 2 good JPEGs, --seed=$seed: exit $?"
  grep -qP "^skipped \d+ unreadable examples" "$out" || fail "--seed=$seed: the empty files are not counted"
done
if train --data_dir="$dir/none" >"$out" 2>"$out.err"; then fail "a folder of empty files trained"; fi
grep -q "every one of the 40 examples of the split has been found unreadable" "$out.err" \
  || fail "a folder of only empty files is not refused as such"

# A JPEG this process may not open: skipped and counted like a corrupt one. As root the
# run is made as nobody (setpriv); the build must then be readable by nobody.
mkdir -p "$dir/locked/train/a"
for i in 0 1 2 3; do "$MAKE_JPEG" "$dir/locked/train/a/g$i.jpg" 32 32 "$i"; done
chmod -R a+rX "$dir" && chmod 000 "$dir/locked/train/a/g1.jpg"
as=()
if [ "$(id -u)" = 0 ]; then
  as=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
  if ! command -v setpriv >/dev/null || ! "${as[@]}" test -x "$CNNBENCH" -a -r "$dir/locked/train/a/g0.jpg"; then
    echo "PASS (the EACCES case skipped: as root it needs setpriv and a build user nobody can run)"
    exit 0
  fi
fi
"${as[@]}" "$CNNBENCH" --model=trivial --num_classes=5 --batch_size=2 --num_batches=4 \
  --num_warmup_batches=0 --data_dir="$dir/locked" >"$out" 2>"$out.err" || fail "a locked JPEG: exit $?"
grep -q "skipped .*g1.jpg: cannot be opened: Permission denied" "$out.err" || fail "the locked JPEG is not named"
grep -qP "^skipped [1-9]\d* unreadable examples" "$out" || fail "the locked JPEG is not counted"
echo "PASS"
