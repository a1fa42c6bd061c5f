#!/usr/bin/env bash
# A --train_dir's checkpoints are never thrown away, and bad weights are never trained on
# (issue 23, findings 1, 2 and 11; the non-root cases are cli_checkpoint_nonroot):
# - a checkpoint whose only fault is 70 trailing bytes, alone in its directory: the run
#   stops before its first step, exit 1, naming the file, why, and
#   --ignore_unreadable_checkpoints; with that flag it trains from step 0 and the file is
#   kept (moved aside, byte for byte), never replaced;
# - the index left at step 5 after step 7 was saved (its update failed: a full disk): the
#   next run resumes from 7, the newest file that reads back whole, rebuilds the index,
#   and step 7's file is not replaced;
# - a tensor holding NaN or Inf is refused naming the file and the tensor (training and
#   --eval); a flipped exponent bit, or a weight of 1e6, stops the run at its first step
#   naming the checkpoint (the loss above 100 x ln(classes)), and nothing is saved.
set -euo pipefail
: "${CNNBENCH:?}" "${CHECKPOINT_EDIT:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; for f in "$tmp"/*.out "$tmp"/*.err; do echo "--- $f"; cat "$f"; done; exit 1; }
run() { "$CNNBENCH" --model=trivial --data_name=cifar10 --batch_size=2 --num_warmup_batches=0 \
          --num_intra_threads=1 "$@"; }
ckpt() { printf '%s/model.ckpt-%010d.safetensors' "$1" "$2"; }
sum() { md5sum <"$1" | cut -d' ' -f1; }
# NAME ARGS...: runs, its output in $tmp/NAME.out and .err; sets $code.
try() { local name=$1; shift; set +e; run "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"; code=$?; set -e; }

try base --num_batches=5 --save_model_steps=1 --train_dir="$tmp/base"
[ "$code" -eq 0 ] || fail "base run: exit $code"

# 70 trailing bytes: refused, the file untouched; with the flag, kept aside whole.
mkdir "$tmp/trail"
cp "$(ckpt "$tmp/base" 5)" "$tmp/trail/"
printf '%070d' 0 >>"$(ckpt "$tmp/trail" 5)"
before=$(sum "$(ckpt "$tmp/trail" 5)")
try trail --num_batches=5 --train_dir="$tmp/trail"
[ "$code" -eq 1 ] || fail "70 trailing bytes: exit $code, expected 1 (the file must not be replaced)"
grep -q "holds 1 checkpoint file(s) and none reads back whole" "$tmp/trail.err" || fail "trail: no refusal"
grep -qF "$(ckpt "$tmp/trail" 5): 70 trailing bytes" "$tmp/trail.err" || fail "trail: file and reason not named"
grep -q -- "--ignore_unreadable_checkpoints" "$tmp/trail.err" || fail "trail: the flag is not named"
grep -q "images/sec" "$tmp/trail.out" && fail "trail: steps ran before the refusal"
[ "$(sum "$(ckpt "$tmp/trail" 5)")" = "$before" ] || fail "trail: the file changed"
try trail_ignore --num_batches=5 --train_dir="$tmp/trail" --ignore_unreadable_checkpoints
[ "$code" -eq 0 ] || fail "--ignore_unreadable_checkpoints: exit $code"
grep -q "training starts at step 0" "$tmp/trail_ignore.err" || fail "trail_ignore: did not start over"
[ -f "$(ckpt "$tmp/trail" 5).kept" ] && [ "$(sum "$(ckpt "$tmp/trail" 5).kept")" = "$before" ] \
  || fail "trail_ignore: the unreadable file was not kept whole as .kept"
grep -qF "kept as $(ckpt "$tmp/trail" 5).kept" "$tmp/trail_ignore.err" || fail "trail_ignore: the move is not said"

# The index one save behind: resume from the newest file. (--num_batches counts the total,
# global steps included, as tf_cnn_benchmarks.)
cp -r "$tmp/base" "$tmp/behind"
cp "$tmp/behind/checkpoint" "$tmp/index_at_5"
try behind_save --num_batches=7 --train_dir="$tmp/behind"
[ "$code" -eq 0 ] && [ -f "$(ckpt "$tmp/behind" 7)" ] || fail "saving step 7: exit $code"
cp "$tmp/index_at_5" "$tmp/behind/checkpoint" # as if the index update after 7 had failed
seven=$(sum "$(ckpt "$tmp/behind" 7)")
try behind --num_batches=8 --train_dir="$tmp/behind"
[ "$code" -eq 0 ] || fail "index behind: exit $code"
grep -q "resuming from .*model.ckpt-0000000007.safetensors (global step 7)" "$tmp/behind.err" \
  || fail "index behind: did not resume from step 7, the newest whole file"
grep -q "rebuilt the checkpoint index .*missed 1 newer one" "$tmp/behind.err" || fail "index behind: not rebuilt"
grep -q '"latest": *"model.ckpt-0000000008.safetensors"' "$tmp/behind/checkpoint" || fail "index behind: latest is not 8"
grep -q '"model.ckpt-0000000007.safetensors"' "$tmp/behind/checkpoint" || fail "index behind: 7 not listed"
[ "$(sum "$(ckpt "$tmp/behind" 7)")" = "$seven" ] || fail "index behind: step 7 was overwritten"

# Bad weights.
kernel=affine0/xw_plus_b/kernel
for bad in nan inf; do
  mkdir "$tmp/$bad"
  "$CHECKPOINT_EDIT" set "$kernel" 3 "$bad" "$(ckpt "$tmp/base" 5)" "$(ckpt "$tmp/$bad" 5)"
  for mode in train eval; do
    extra=(); [ "$mode" = eval ] && extra=(--eval)
    try "$bad$mode" --num_batches=6 --train_dir="$tmp/$bad" "${extra[@]}"
    [ "$code" -ne 0 ] || fail "$bad ($mode): accepted"
    grep -qF "checkpoint $(ckpt "$tmp/$bad" 5): tensor '$kernel' holds 1 value(s) that are not finite" \
      "$tmp/$bad$mode.err" || fail "$bad ($mode): file and tensor not named"
    grep -q "images/sec" "$tmp/$bad$mode.out" && fail "$bad ($mode): steps ran"
  done
done
for bad in flip huge; do
  mkdir "$tmp/$bad"
  if [ $bad = flip ]; then
    "$CHECKPOINT_EDIT" flipbit "$kernel" 3 30 "$(ckpt "$tmp/base" 5)" "$(ckpt "$tmp/$bad" 5)"
  else
    "$CHECKPOINT_EDIT" set affine1/xw_plus_b/kernel 0 1e6 "$(ckpt "$tmp/base" 5)" "$(ckpt "$tmp/$bad" 5)"
  fi
  try "$bad" --num_batches=8 --save_model_steps=1 --train_dir="$tmp/$bad"
  [ "$code" -eq 1 ] || fail "$bad: exit $code, expected 1"
  grep -qF "step 1 after resuming from $(ckpt "$tmp/$bad" 5): the loss is" "$tmp/$bad.err" \
    || fail "$bad: the checkpoint is not named"
  grep -q "above 100 x ln(10 classes) = 230.3\|not finite" "$tmp/$bad.err" || fail "$bad: no bound"
  grep -q "init_learning_rate" "$tmp/$bad.err" && fail "$bad: blames the learning rate"
  [ "$(ls "$tmp/$bad" | grep -c safetensors)" -eq 1 ] || fail "$bad: the bad weights were saved again"
done
grep -q "above 100 x ln(10 classes)" "$tmp/huge.err" || fail "huge: not the bound"
echo PASS
