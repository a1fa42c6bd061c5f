#!/usr/bin/env bash
# Resuming on real data continues the data stream too: lenet on a JPEG folder (random
# crops, flips and colour distortions, so each example's augmentation matters), 12 steps
# straight and 6 steps, then 6 more resumed from --train_dir, print the same loss at
# every step and end with the same checkpoint. The stream matters: the same step-6
# checkpoint resumed as if at step 0 (parameters and momentum kept, the data read from the
# start of its order again, as a datasource without cnnb.datasource.skip/1 would) ends
# elsewhere. A datasource without the extension is named in a warning.
set -euo pipefail
if [ -z "${MAKE_IMAGE_FOLDER:-}" ]; then
  echo "SKIP: the build has no JPEG component (libjpeg-turbo), so no imagenet datasource"; exit 77
fi
: "${CNNBENCH:?}" "${CHECKPOINT_COMPARE:?}" "${CHECKPOINT_EDIT:?}" "${CNNB_BUILD_DIR:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; for f in "$tmp"/*.out "$tmp"/*.err; do echo "--- $f"; cat "$f"; done; exit 1; }

# 20 images, batches of 4: an epoch is 5 steps, so the resumed half starts inside the
# second epoch and crosses into the third.
"$MAKE_IMAGE_FOLDER" "$tmp/data" train 4 5 0 random
common=(--model=lenet --data_dir="$tmp/data" --num_classes=5 --batch_size=4 --num_warmup_batches=0
        --display_every=1 --distortions=true --optimizer=momentum --init_learning_rate=0.01
        --num_intra_threads=1 --datasets_num_private_threads=1)
losses() { grep -oP '^\d+\timages/sec: .*\t\K\d+\.\d{3}$' "$1"; }
ckpt() { echo "$tmp/$1/model.ckpt-00000000$2.safetensors"; }

"$CNNBENCH" "${common[@]}" --num_batches=12 --train_dir="$tmp/straight" >"$tmp/straight.out" \
  2>"$tmp/straight.err" || fail "straight run: exit $?"
# --num_batches is the total on resume (tf_cnn_benchmarks' end_local_step): 6, then to 12.
for half in first second; do
  total=6; [ "$half" = second ] && total=12
  "$CNNBENCH" "${common[@]}" --num_batches=$total --train_dir="$tmp/resumed" >"$tmp/$half.out" \
    2>"$tmp/$half.err" || fail "$half half: exit $?"
done
grep -q "resuming from .*(global step 6)" "$tmp/second.err" || fail "the second half did not resume"
grep -q "the stream continues after 6 batches (24 examples), in epoch 1 " "$tmp/second.err" \
  || fail "the datasource did not say where its stream continues"
[ "$(losses "$tmp/straight.out" | wc -l)" -eq 12 ] || fail "12 step lines expected"
diff <(losses "$tmp/straight.out") <(cat <(losses "$tmp/first.out") <(losses "$tmp/second.out")) \
  >"$tmp/loss.diff" || fail "the losses differ: $(cat "$tmp/loss.diff")"
"$CHECKPOINT_COMPARE" 1e-6 "$(ckpt straight 12)" "$(ckpt resumed 12)" >"$tmp/compare.out" \
  || fail "the final checkpoints differ: $(cat "$tmp/compare.out")"
echo "12 losses equal; $(cat "$tmp/compare.out")"

# The same resume with the data order restarted: the step-6 checkpoint claiming step 0
# (the learning rate is constant, so only where the stream starts changes).
mkdir "$tmp/restarted"
"$CHECKPOINT_EDIT" meta cnnbench.global_step 0 "$(ckpt resumed 06)" "$tmp/restarted/model.ckpt-0000000000.safetensors" \
  || fail "checkpoint_edit failed"
"$CNNBENCH" "${common[@]}" --num_batches=6 --train_dir="$tmp/restarted" >"$tmp/restarted.out" \
  2>"$tmp/restarted.err" || fail "restarted half: exit $?"
grep -q "resuming from .*(global step 0)" "$tmp/restarted.err" || fail "the restarted half did not resume"
if diff <(losses "$tmp/second.out") <(losses "$tmp/restarted.out") >/dev/null; then
  fail "a resume reading the data from its start trained as one continuing it: the test cannot fail"
fi
if "$CHECKPOINT_COMPARE" 1e-6 "$(ckpt straight 12)" "$(ckpt restarted 06)" >"$tmp/compare.out"; then
  fail "a resume reading the data from its start ended where the straight run did"
fi

# A datasource without the extension: the resumed run warns, and trains.
fixture_data="$CNNB_BUILD_DIR/fixtures/faults/libfixture_datasource.so"
if [ -f "$fixture_data" ]; then
  fixture=(--model=lenet --num_classes=5 --batch_size=2 --num_warmup_batches=0 --num_intra_threads=1
           --plugin="$fixture_data" --datasource=fixture_data --train_dir="$tmp/fixture")
  for half in 1 2; do
    "$CNNBENCH" "${fixture[@]}" --num_batches=$half >"$tmp/fixture$half.out" 2>"$tmp/fixture$half.err" \
      || fail "fixture_data half $half: exit $?"
  done
  grep -q "datasource 'fixture_data' cannot continue its stream: a resumed run reads from the start of its data order again" \
    "$tmp/fixture2.err" || fail "no warning for a datasource without cnnb.datasource.skip/1"
  [ "$(grep -c "cannot continue its stream" "$tmp/fixture2.err")" -eq 1 ] || fail "the warning is not said once"
  if grep -q "cannot continue its stream" "$tmp/fixture1.err"; then fail "a fresh run warned"; fi
fi
if grep -q "cannot continue its stream" "$tmp/second.err"; then fail "imagenet warned"; fi
# Synthetic data is the same every step: its no-op answer means no warning.
for half in 1 2; do
  "$CNNBENCH" --model=lenet --batch_size=2 --num_batches=$half --num_warmup_batches=0 --num_intra_threads=1 \
    --train_dir="$tmp/synthetic" >"$tmp/synthetic.out" 2>"$tmp/synthetic.err" || fail "synthetic: exit $?"
done
grep -q "resuming from" "$tmp/synthetic.err" || fail "synthetic: no resume"
if grep -q "cannot continue its stream" "$tmp/synthetic.err"; then fail "synthetic warned"; fi
echo PASS
