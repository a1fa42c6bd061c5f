#!/usr/bin/env bash
# Label gpu / cuda_fake (tests/CMakeLists.txt: every cli/gpu_*.sh). An fp16 run whose
# gradients overflow is never silent: with the static loss scale (tf_cnn_benchmarks'
# default) the updates are applied, as tf does, with one warning at the first overflow
# and "fp16 gradients overflowed in N of M steps" at the end;
# --fp16_enable_auto_loss_scale skips them and says so. A scale of 2^24 on LeNet overflows fp16's 65504 in every step.
# Skips (77), saying why, where the cuda device cannot run.
set -uo pipefail
: "${CNNBENCH:?}"
why=$("$CNNBENCH" --list_plugins 2>&1 | sed -n '/^Devices that cannot run on this machine:/,/^$/p' | grep '^  cuda: ')
"$CNNBENCH" --list_plugins 2>&1 | grep -Eq "^  device +cuda +" || { echo "SKIP: the cuda device is not built here"; exit 77; }
[ -z "$why" ] || { echo "SKIP: the cuda device cannot run here:${why#  cuda:}"; exit 77; }
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
common=(--device=cuda --model=lenet --image_size=28 --batch_size=4 --num_batches=3
        --num_warmup_batches=0 --use_fp16 --fp16_loss_scale=16777216)

# One step: the next would train on the inf weights the applied update left, and stop
# with "the loss is nan: training diverged", as tf does.
timeout 300 "$CNNBENCH" "${common[@]}" --num_batches=1 >"$dir/static.out" 2>"$dir/static.err" ||
  fail "static scale: exit $?: $(tail -3 "$dir/static.err")"
n=$(grep -c "fp16 gradients overflowed to inf/NaN at the static loss scale" "$dir/static.err")
[ "$n" -eq 1 ] || fail "static scale: $n overflow warnings, want 1: $(cat "$dir/static.err")"
grep -q "^fp16 gradients overflowed in 1 of 1 steps (their updates applied" "$dir/static.out" ||
  fail "static scale: no count of the overflowed step: $(tail -5 "$dir/static.out")"

timeout 300 "$CNNBENCH" "${common[@]}" --fp16_enable_auto_loss_scale >"$dir/auto.out" 2>"$dir/auto.err" ||
  fail "--fp16_enable_auto_loss_scale: exit $?: $(tail -3 "$dir/auto.err")"
! grep -q "at the static loss scale" "$dir/auto.err" ||
  fail "--fp16_enable_auto_loss_scale: warned as for a static scale: $(cat "$dir/auto.err")"
grep -q "^fp16 gradients overflowed in [1-3] of 3 steps (their updates skipped" "$dir/auto.out" ||
  fail "--fp16_enable_auto_loss_scale: no count of skipped steps: $(tail -5 "$dir/auto.out")"

# A scale that does not overflow says nothing of overflows.
timeout 300 "$CNNBENCH" "${common[@]/--fp16_loss_scale=16777216/--fp16_loss_scale=1}" \
  >"$dir/clean.out" 2>&1 || fail "scale 1: exit $?"
! grep -q "overflowed" "$dir/clean.out" || fail "scale 1: an overflow reported: $(grep overflowed "$dir/clean.out")"
[ "$failures" -eq 0 ] && echo "PASS: gpu_fp16_overflow" || exit 1
