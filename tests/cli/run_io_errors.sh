#!/usr/bin/env bash
# I/O failures while running exit 1 (docs/running.md, "Exit status"), each with a message
# naming what could not be read or written; bad data found while running stays 2:
# - the report to a full standard output (/dev/full), for a run and for --version,
#   --help and --list_plugins;
# - the final checkpoint into a --train_dir that fills up (a 64 KiB tmpfs; skipped where
#   mounts cannot be made);
# - an imagenet shard deleted while the run reads the set (it reopens every shard each
#   epoch): exit 2 before issue 23 (finding 12b), as if the data were bad; a label
#   outside the model's classes, found at the first batch, is still 2. Skipped without
#   the JPEG component (no imagenet datasource, no cnnbench-mkrecords).
set -uo pipefail
: "${CNNBENCH:?}"
tmp=$(mktemp -d)
mounted=
trap '[ -n "$mounted" ] && umount "$mounted"; rm -rf "$tmp"' EXIT
failures=0
bad() { echo "FAIL: $*"; failures=$((failures + 1)); }
small=(--model=trivial --data_name=cifar10 --batch_size=2 --num_warmup_batches=0 --num_intra_threads=1)

# The report to a full standard output.
for args in "${small[*]} --num_batches=2" --version --help --list_plugins \
            "--list_plugins --list_format=json"; do
  # shellcheck disable=SC2086 # the words of one command line
  "$CNNBENCH" $args >/dev/full 2>"$tmp/full.err"; rc=$?
  [ "$rc" -eq 1 ] || bad "cnnbench $args >/dev/full: exit $rc, expected 1"
  grep -qF "cnnbench: error: writing to standard output failed" "$tmp/full.err" \
    || bad "cnnbench $args >/dev/full: standard output not named: $(cat "$tmp/full.err")"
  [ "$(grep -c "error" "$tmp/full.err")" -eq 1 ] \
    || bad "cnnbench $args >/dev/full: more than one error: $(cat "$tmp/full.err")"
done

# The final checkpoint into a --train_dir that fills up: the write check before the
# first step passes (a few bytes fit), the 200 KiB checkpoint does not.
mkdir "$tmp/ckpt"
if mount -t tmpfs -o size=64k tmpfs "$tmp/ckpt" 2>"$tmp/mount.err"; then
  mounted=$tmp/ckpt
  "$CNNBENCH" "${small[@]}" --num_batches=3 --train_dir="$tmp/ckpt" >"$tmp/ckpt.out" 2>"$tmp/ckpt.err"
  rc=$?
  [ "$rc" -eq 1 ] || bad "checkpoint on a full disk: exit $rc, expected 1"
  grep -qF "cnnbench: error: $tmp/ckpt/model.ckpt-0000000003.safetensors: writing the temporary file" \
    "$tmp/ckpt.err" || bad "the checkpoint that could not be written is not named: $(cat "$tmp/ckpt.err")"
  grep -q "No space left on device" "$tmp/ckpt.err" || bad "the reason is not given"
  umount "$mounted" && mounted=
else
  echo "skipped the full --train_dir (cannot mount a tmpfs here: $(cat "$tmp/mount.err"))"
fi

# An imagenet shard gone while the run reads the set.
if [ -n "${MKRECORDS:-}" ] && [ -n "${MAKE_IMAGE_FOLDER:-}" ]; then
  "$MAKE_IMAGE_FOLDER" "$tmp/folder" train 4 14 >/dev/null || bad "make_image_folder"
  "$MKRECORDS" --input_dir="$tmp/folder/train" --output_dir="$tmp/rec" --name=train \
    --num_shards=4 >/dev/null 2>&1 || bad "mkrecords"
  imagenet=(--model=trivial --data_dir="$tmp/rec" --batch_size=2 --num_warmup_batches=0
            --num_intra_threads=1 --display_every=1)
  # Labels 1..4 with 4 classes: bad data, found at the first batch, stays exit 2.
  "$CNNBENCH" "${imagenet[@]}" --num_classes=4 --num_batches=3 >"$tmp/label.out" 2>"$tmp/label.err"
  rc=$?
  [ "$rc" -eq 2 ] || bad "a label outside the classes: exit $rc, expected 2"
  grep -q "label 4 is outside the model's 4 classes" "$tmp/label.err" || bad "the label is not named"
  # 56 examples, 28 steps an epoch: the shards are deleted once step 1 is printed, and
  # the next epoch (or the next shard of this one) cannot open them.
  "$CNNBENCH" "${imagenet[@]}" --num_classes=5 --num_batches=1000000 >"$tmp/gone.out" 2>"$tmp/gone.err" &
  pid=$!
  for _ in $(seq 600); do grep -q "^1	images/sec" "$tmp/gone.out" && break; sleep 0.1; done
  rm -f "$tmp"/rec/train-*
  wait "$pid"; rc=$?
  [ "$rc" -eq 1 ] || bad "a shard deleted while running: exit $rc, expected 1: $(tail -1 "$tmp/gone.err")"
  grep -qE "cnnbench: error: reading a batch: imagenet: $tmp/rec/train-0000[0-3]-of-00004: No such file or directory" \
    "$tmp/gone.err" || bad "the shard that could not be opened is not named: $(tail -1 "$tmp/gone.err")"
else
  echo "skipped the imagenet cases (the build has no JPEG component)"
fi

[ "$failures" -eq 0 ] || exit 1
echo PASS
