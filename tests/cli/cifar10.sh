#!/usr/bin/env bash
# The cifar10 datasource through the CLI, on CIFAR-10 files make_cifar writes: the probe
# picks it for --data_name=cifar10 with a --data_dir; training and --eval run; uint8 and
# float32 batches train to the same parameters and losses (with one replica and with
# two); a datasource or device without the uint8 extensions still runs (float32) and is
# named when --input_dtype=uint8 forces it; bad files, a wrong --data_dir and a wrong
# image size end with a message naming what is wrong, and a non-zero exit.
set -euo pipefail
: "${CNNBENCH:?}" "${MAKE_CIFAR:?}" "${TRAIN_PARAMS:?}" "${PARAMS_COMPARE:?}" "${CNNB_BUILD_DIR:?}"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
out="$work/out"
fail() { echo "FAIL: $*"; echo "--- stdout"; cat "$out" || true; echo "--- stderr"; cat "$out.err" || true; exit 1; }
# Runs cnnbench; the command must succeed.
run() { "$CNNBENCH" "$@" >"$out" 2>"$out.err" || fail "exit code $? for: $*"; }
# Runs cnnbench; it must fail, and say each of the given phrases on stderr.
refused() {
  local args=("${@:1:$#-1}") want="${*: -1}"
  if "$CNNBENCH" "${args[@]}" >"$out" 2>"$out.err"; then fail "succeeded: ${args[*]}"; fi
  grep -qF -- "$want" "$out.err" || fail "no '$want' in the message of: ${args[*]}"
}

data="$work/cifar"
mkdir "$data"
"$MAKE_CIFAR" "$data" 64 7
common=(--model=trivial --data_name=cifar10 --batch_size=16 --num_warmup_batches=0)

# Picked by the probe; the header names it; the loss is a number at every step.
run "${common[@]}" --data_dir="$data" --num_batches=8 --display_every=1
grep -q 'Dataset:     cifar10 (cifar10)' "$out" || fail "cifar10 was not the datasource"
[ "$(grep -cP '^\d+\timages/sec: .*\t\d+\.\d{3}$' "$out")" -eq 8 ] || fail "expected 8 step lines"
grep -q 'holds 320 training examples where CIFAR-10 has 50000' "$out.err" \
  || fail "the epoch's size differing from CIFAR-10's was not said"
grep -q 'Num epochs:  0.40' "$out" || fail "epochs not counted over the 320 examples read"

# The archive's own folder inside --data_dir works too; --num_epochs counts its examples.
mkdir "$work/archive"; cp -r "$data" "$work/archive/cifar-10-batches-bin"
run "${common[@]}" --data_dir="$work/archive" --num_epochs=1
grep -q 'Num batches: 20' "$out" || fail "one epoch of 320 in batches of 16 is not 20 batches"

# Evaluation reads test_batch.bin and reports accuracy.
run "${common[@]}" --data_dir="$data" --num_batches=4 --eval --eval_random_weights
grep -q 'Mode:        evaluation' "$out" || fail "--eval did not evaluate"
grep -qP '^1\t\d+\.\d examples/sec$' "$out" || fail "no tf-style examples/sec line in --eval steps"
grep -qP '^Accuracy @ 1 = \d\.\d{4} Accuracy @ 5 = \d\.\d{4} \[64 examples\]$' "$out" || fail "no accuracy line"

# uint8 batches (normalized by the device) and float32 ones train identically: the same
# loss at every step and the same final parameters, for ResNet-20 (conv, batch norm) and
# for two replicas.
for args in "--model=trivial --batch_size=16 --num_batches=12" \
            "--model=resnet20 --batch_size=8 --num_batches=3" \
            "--model=trivial --batch_size=8 --num_batches=6 --num_gpus=2 --variable_update=replicated"; do
  for dtype in uint8 float32; do
    # shellcheck disable=SC2086
    CNNB_PARAMS_OUT="$work/p.$dtype" "$TRAIN_PARAMS" $args --data_name=cifar10 --data_dir="$data" \
      --num_warmup_batches=0 --display_every=1 --input_dtype=$dtype --log_level=debug \
      >"$out" 2>"$out.err" || fail "exit code $? for $args --input_dtype=$dtype"
    want="input: float32"; [ "$dtype" = uint8 ] && want="input: uint8 NHWC"
    grep -q "$want" "$out.err" || fail "--input_dtype=$dtype did not use $want"
    awk -F'\t' '/^[0-9]+\timages/ {print $1, $3}' "$out" >"$work/loss.$dtype"
  done
  [ -s "$work/loss.uint8" ] || fail "no losses printed for $args"
  cmp -s "$work/loss.uint8" "$work/loss.float32" \
    || fail "$args: losses differ: $(paste "$work/loss.uint8" "$work/loss.float32" | head -5)"
  "$PARAMS_COMPARE" 1e-6 "$work/p.float32.0.0" "$work/p.uint8.0.0" >/dev/null \
    || fail "$args: parameters after uint8 and float32 batches differ"
done
# auto picks uint8 when both sides offer it.
run "${common[@]}" --data_dir="$data" --num_batches=1 --log_level=debug
grep -q 'input: uint8 NHWC' "$out.err" || fail "auto did not pick uint8 for cifar10 on cpu"

# Plugins without the extensions: synthetic data, and a device with no optional slot,
# run with float32 batches; forcing uint8 names the one that lacks it.
run --model=trivial --batch_size=4 --num_batches=2 --num_warmup_batches=0 --log_level=debug
grep -q 'input: float32 batches (the datasource offers no cnnb.datasource.uint8_nhwc/1)' "$out.err" \
  || fail "synthetic data did not travel as float32"
refused --model=trivial --batch_size=4 --num_batches=2 --input_dtype=uint8 \
  "--input_dtype=uint8: the datasource, datasource plugin 'synthetic'"
fixture_data="$CNNB_BUILD_DIR/fixtures/faults/libfixture_datasource.so"
minimal_device="$CNNB_BUILD_DIR/fixtures/faults/libfixture_minimal_device.so"
if [ -f "$fixture_data" ] && [ -f "$minimal_device" ]; then
  run --model=trivial --batch_size=4 --num_batches=2 --num_warmup_batches=0 \
    --plugin="$fixture_data" --datasource=fixture_data
  run "${common[@]}" --data_dir="$data" --num_batches=2 --plugin="$minimal_device" \
    --device=fixture_minimal --log_level=debug
  grep -q 'input: float32 batches (the device offers no cnnb.device.uint8_input/1)' "$out.err" \
    || fail "a device without the extension did not get float32 batches"
  refused "${common[@]}" --data_dir="$data" --num_batches=2 --plugin="$minimal_device" \
    --device=fixture_minimal --input_dtype=uint8 "cannot normalize uint8 batches"
else
  echo "note: test fixtures not built; skipping the old-plugin runs"
fi

# Wrong --data_dir: the probe's reason names the files and where it looked.
mkdir "$work/empty"
refused "${common[@]}" --data_dir="$work/empty" --num_batches=1 \
  "looked for data_batch_1.bin, data_batch_2.bin, data_batch_3.bin, data_batch_4.bin, data_batch_5.bin"
refused "${common[@]}" --data_dir="$work/nonexistent" --num_batches=1 "$work/nonexistent: No such file"
refused "${common[@]}" --data_dir="$work/empty" --num_batches=1 --eval --eval_random_weights "looked for test_batch.bin"
# Wrong image size: ResNet-20 builds at 28x28 too, the data does not.
refused --model=resnet20 --data_name=cifar10 --batch_size=4 --data_dir="$data" --num_batches=1 \
  --image_size=28 "its images are 32x32 with 3 channels, and the model asks for 28x28"

# Bad files: a size that is no whole number of records; a label out of range.
cp -r "$data" "$work/short"
head -c 5000 "$data/data_batch_3.bin" >"$work/short/data_batch_3.bin"
refused "${common[@]}" --data_dir="$work/short" --num_batches=1 \
  "data_batch_3.bin: 5000 bytes is not a whole, non-zero number of 3073-byte records"
cp -r "$data" "$work/label"
printf '\x0c' | dd of="$work/label/test_batch.bin" bs=1 seek=$((3073 * 5)) conv=notrunc status=none
refused "${common[@]}" --data_dir="$work/label" --num_batches=1 --eval --eval_random_weights \
  "test_batch.bin: record 5 (byte offset 15365) has label 12"
echo "PASS"
