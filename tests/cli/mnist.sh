#!/usr/bin/env bash
# The mnist datasource through the CLI, on the real Fashion-MNIST files of Debian's
# dataset-fashion-mnist (/usr/share/datasets/fashion-mnist, gzipped IDX; skips, saying why,
# without them): lenet builds for 1 input channel; the probe picks the datasource for
# --data_name=mnist; lenet trains to a test-set top-1 of 0.80 within 400 steps of 100, and
# --target_accuracy=0.8 stops it at the first evaluation that reaches it; uint8 and
# float32 batches train to the same losses; a resumed run continues the data stream; the
# CIFAR-10 ResNet-20 trains at 28x28 and, padded, at 32x32; --mnist_augment trains and is
# shown under the plugin in --help; a wrong image size, --data_dir or flag value ends with
# a message naming it and exit status 2. About 15-30 s on 2 cores.
set -euo pipefail
: "${CNNBENCH:?}" "${CHECKPOINT_COMPARE:?}" "${CNNB_SOURCE_DIR:?}"
source "$CNNB_SOURCE_DIR/tests/support/eval_lines.sh"
data=${CNNB_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
if [ ! -f "$data/train-images-idx3-ubyte.gz" ] && [ ! -f "$data/train-images-idx3-ubyte" ]; then
  echo "SKIP: no Fashion-MNIST in $data (apt-get install dataset-fashion-mnist)"; exit 77
fi
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
out="$work/out"
fail() { echo "FAIL: $*"; echo "--- stdout"; cat "$out" || true; echo "--- stderr"; cat "$out.err" || true; exit 1; }
run() { "$CNNBENCH" "$@" >"$out" 2>"$out.err" || fail "exit code $? for: $*"; }
# Runs cnnbench; it must exit with status 2 and say the last argument on stderr.
refused() {
  local args=("${@:1:$#-1}") want="${*: -1}" code=0
  "$CNNBENCH" "${args[@]}" >"$out" 2>"$out.err" || code=$?
  [ "$code" -eq 2 ] || fail "exit code $code (want 2) for: ${args[*]}"
  grep -qF -- "$want" "$out.err" || fail "no '$want' in the message of: ${args[*]}"
}
losses() { grep -oP '^\d+\timages/sec: .*\t\K\d+\.\d{3}$' "$1"; }
common=(--data_name=mnist --data_dir="$data" --num_warmup_batches=0)

# A build without zlib cannot read the package's .gz files: say so rather than fail.
code=0
"$CNNBENCH" --model=trivial "${common[@]}" --num_batches=1 >"$out" 2>"$out.err" || code=$?
if [ "$code" -ne 0 ] && grep -q "has no zlib" "$out.err"; then
  echo "SKIP: this build's mnist datasource has no zlib, and $data holds .gz files"; exit 77
fi
[ "$code" -eq 0 ] || fail "exit code $code for one trivial step"
grep -q 'Dataset:     mnist (mnist)' "$out" || fail "the probe did not pick the mnist datasource"

# lenet for 1 channel: input [1, 28, 28], the first conv 5x5x1x32 + 32 biases.
run --model=lenet --data_name=mnist --model_info
grep -q '^Model: lenet (mnist, 28x28, 10 classes)$' "$out" || fail "lenet's mnist variant not described"
grep -qP '^input +input +\[1, 28, 28\] ' "$out" || fail "the input is not [N, 1, 28, 28]"
grep -qP '^conv0/conv2d +conv2d +\[32, 28, 28\] +832 ' "$out" \
  || fail "the first conv does not read 1 channel (5*5*1*32 + 32 = 832 parameters)"

# Time to accuracy: evaluations of the whole test split (100 batches of 100) every 20
# steps; it stops at the first that reaches 0.80 (about step 80 here), within 400 steps.
target=0.8
run --model=lenet "${common[@]}" --batch_size=100 --num_batches=400 --optimizer=momentum \
  --init_learning_rate=0.01 --display_every=20 --eval_during_training_every_n_steps=20 \
  --target_accuracy=$target
line=$(grep -P "^Reached --target_accuracy=$target: top-1 \d\.\d{4} at step \d+ " "$out") \
  || fail "--target_accuracy=$target not reached in 400 steps"
step=$(grep -oP 'at step \K\d+' <<<"$line")
top1=$(grep -oP 'top-1 \K[0-9.]+' <<<"$line")
eval_lines "$out" | grep -q "^Step $step: Accuracy @ 1 = $top1 Accuracy @ 5 = [0-9.]* \[10000 examples\]$" \
  || fail "step $step's evaluation is not top-1 $top1 over the 10000 test images"
awk -v a="$top1" -v t=$target 'BEGIN { exit !(a >= t) }' || fail "stopped at top-1 $top1 < $target"
first=$(eval_lines "$out" | awk -v t=$target '/^Step [0-9]+: Accuracy @ 1 = / && $7 + 0 >= t { sub(":", "", $2); print $2; exit }')
[ "$first" = "$step" ] || fail "stopped at step $step; the first evaluation >= $target was step $first"
[ "$(grep -oP '^\d+(?=\timages/sec)' "$out" | tail -1)" -eq "$step" ] \
  || fail "steps ran after the target was reached at step $step"
echo "lenet: top-1 $top1 at step $step (batch 100), $(grep -oP 'in \K[0-9.]+ s wall time' <<<"$line")"

# uint8 batches (normalized by the device) and float32 ones: the same losses.
for dtype in uint8 float32; do
  run --model=lenet "${common[@]}" --batch_size=32 --num_batches=8 --display_every=1 \
    --input_dtype=$dtype --log_level=debug
  want="input: float32"; [ "$dtype" = uint8 ] && want="input: uint8 NHWC"
  grep -q "$want" "$out.err" || fail "--input_dtype=$dtype did not use $want"
  losses "$out" >"$work/loss.$dtype"
done
[ "$(wc -l <"$work/loss.uint8")" -eq 8 ] || fail "expected 8 losses"
cmp -s "$work/loss.uint8" "$work/loss.float32" || fail "uint8 and float32 losses differ"

# Resuming continues the stream (cnnb.datasource.skip/1): 8 steps straight, with crops and
# flips, equal 4 and 4 more resumed from --train_dir, losses and final checkpoint.
resume=(--model=lenet "${common[@]}" --batch_size=16 --display_every=1 --optimizer=momentum
        --init_learning_rate=0.01 --mnist_augment=crop_flip)
run "${resume[@]}" --num_batches=8 --train_dir="$work/straight"
losses "$out" >"$work/loss.straight"
run "${resume[@]}" --num_batches=4 --train_dir="$work/resumed"
losses "$out" >"$work/loss.resumed"
# --num_batches is the total on resume, as tf_cnn_benchmarks: 4 more to step 8.
run "${resume[@]}" --num_batches=8 --train_dir="$work/resumed"
grep -q "resuming from .*(global step 4)" "$out.err" || fail "the second half did not resume"
grep -q "the stream continues after 4 batches (64 examples), in epoch 0" "$out.err" \
  || fail "the mnist datasource did not continue its stream"
losses "$out" >>"$work/loss.resumed"
[ "$(wc -l <"$work/loss.straight")" -eq 8 ] || fail "expected 8 losses straight"
cmp -s "$work/loss.straight" "$work/loss.resumed" \
  || fail "resumed losses differ: $(paste "$work/loss.straight" "$work/loss.resumed")"
"$CHECKPOINT_COMPARE" 1e-6 "$work/straight/model.ckpt-0000000008.safetensors" \
  "$work/resumed/model.ckpt-0000000008.safetensors" >/dev/null || fail "the final checkpoints differ"

# A CIFAR-10 ResNet: 28x28 as the model describes it for mnist, and padded to 32x32.
for size in 28 32; do
  run --model=resnet20 "${common[@]}" --batch_size=32 --num_batches=15 --display_every=5 \
    --image_size=$size
  [ "$(losses "$out" | wc -l)" -eq 4 ] || fail "resnet20 at $size: expected 4 loss lines"
  if [ "$size" = 32 ]; then
    grep -q "padded with background to the model's 32x32" "$out.err" || fail "32x32: no padding said"
  fi
done

# --mnist_augment: under the plugin in --help; a wrong value refused naming it.
run --help
grep -A1 '^Plugin mnist:' "$out" | grep -q -- '--mnist_augment' || fail "--mnist_augment not under 'Plugin mnist:'"
refused --model=lenet "${common[@]}" --num_batches=1 --mnist_augment=flip \
  "--mnist_augment=flip: expected none, crop or crop_flip"

# What it cannot serve: a smaller image size, a folder without the files.
refused --model=trivial "${common[@]}" --num_batches=1 --image_size=24 \
  "its images are 28x28, and the model asks for 24x24: give --image_size=28 or larger"
mkdir "$work/empty"
refused --model=lenet --data_name=mnist --data_dir="$work/empty" --num_batches=1 \
  "holds no MNIST-layout training split: looked for train-images-idx3-ubyte and train-labels-idx1-ubyte, each plain or .gz"
refused --model=vgg16 --data_name=mnist --num_batches=1 "model 'vgg16' has no mnist variant"
echo PASS
