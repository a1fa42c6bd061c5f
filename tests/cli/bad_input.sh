#!/usr/bin/env bash
# Bad input on the command line: a clear message naming what is wrong, and exit code 2.
set -uo pipefail
: "${CNNBENCH:?}"
failures=0
expect() { # expect <code> <message substring> -- args...
  local code=$1 want=$2; shift 3
  local err; err=$("$CNNBENCH" "$@" 2>&1 >/dev/null); local rc=$?
  if [ "$rc" -ne "$code" ] || ! grep -qF -- "$want" <<<"$err"; then
    echo "FAIL: cnnbench $* -> rc $rc (want $code), stderr:"; echo "$err"; failures=$((failures + 1))
  fi
}
expect 2 "unknown flag --batchsize (did you mean --batch_size?)" -- --batchsize=3
expect 2 "flag --batch_size: 'abc' is not an integer" -- --batch_size=abc
expect 2 "--model=resnt50: no model plugin offers 'resnt50' (did you mean 'resnet50'?)" -- --model=resnt50
expect 2 "'independent' is a strategy plugin" -- --model=independent
expect 2 "--device=tpu" -- --device=tpu
expect 2 "--data_name=svhn: unknown dataset" -- --data_name=svhn
expect 2 "--num_gpus=0" -- --num_gpus=0
expect 2 "--batch_size=-4" -- --batch_size=-4
expect 2 "unexpected argument 'resnet50'" -- resnet50
expect 2 "--use_fp16 contradicts --precision=bf16" -- --use_fp16 --precision=bf16
expect 2 "fp16 is not supported" -- --precision=fp16 --num_batches=1
# Issue 7's list: each refused with the flag named, before anything runs.
expect 2 "--precision=fp16: device cpu cannot run it" -- --precision=fp16 --num_batches=1
expect 2 "--use_fp16: device cpu cannot run it" -- --use_fp16 --num_batches=1
expect 2 "--num_intra_threads=100000: must be in [0, " -- --num_intra_threads=100000
expect 2 "--num_intra_threads=-1" -- --num_intra_threads=-1
expect 2 "--num_epochs=0: must be > 0" -- --num_epochs=0
expect 2 "--num_epochs=-1: must be > 0" -- --num_epochs=-1
expect 2 "--num_epochs=3e+14: must be > 0 and at most 1e9" -- --num_epochs=3e14
expect 2 "'nan' is out of range" -- --num_epochs=nan
expect 2 "--num_batches and --num_epochs both given" -- --num_epochs=1 --num_batches=3
expect 2 "--display_every=0: must be at least 1" -- --display_every=0
expect 2 "--display_every=-5" -- --display_every=-5
expect 2 "--num_warmup_batches=-1: must be at least 0" -- --num_warmup_batches=-1
expect 2 "--gradient_bucket_mb=-1" -- --gradient_bucket_mb=-1
expect 2 "--gradient_bucket_mb=0" -- --gradient_bucket_mb=0
expect 2 "--momentum=-3: must be in [0, 1)" -- --momentum=-3
expect 2 "--momentum=1: must be in [0, 1)" -- --momentum=1
expect 2 "--adam_beta2=1.5" -- --adam_beta2=1.5
expect 2 "--rmsprop_epsilon=0" -- --rmsprop_epsilon=0
expect 2 "--eval and --forward_only both given" -- --eval --forward_only
expect 2 "--num_eval_batches=0: must be at least 1" -- --eval --num_eval_batches=0
expect 2 "--eval_during_training_every_n_steps and --eval_during_training_every_n_epochs both given" -- --eval_during_training_every_n_steps=5 --eval_during_training_every_n_epochs=1
expect 2 "--input_only and --eval both given" -- --input_only --eval
expect 2 "--seed=-1" -- --seed=-1
expect 1 "training diverged" -- --model=lenet --init_learning_rate=1e30 --num_batches=3 --num_warmup_batches=0 --display_every=1
expect 2 "--piecewise_learning_rate_schedule excludes" -- --piecewise_learning_rate_schedule='0.1;2;0.01' --init_learning_rate=0.1
expect 2 "invalid epoch 'x'" -- --piecewise_learning_rate_schedule='0.1;x;0.01'
# --data_dir names the flag the user gave and why each datasource declined, not a
# --datasource the user never typed.
err=$("$CNNBENCH" --data_dir=/nonexistent --num_batches=1 2>&1 >/dev/null); rc=$?
if [ "$rc" -ne 2 ] || ! grep -qF -- "--data_dir=/nonexistent with --data_name=imagenet: no datasource plugin can serve it (" <<<"$err" ||
   ! grep -qF -- "synthetic: generates its images and reads no --data_dir" <<<"$err" ||
   grep -qF -- "--datasource=imagenet" <<<"$err"; then
  echo "FAIL: --data_dir -> rc $rc: $err"; failures=$((failures + 1))
fi
expect 2 "--datasource=imagenett: no datasource plugin offers 'imagenett'" -- --datasource=imagenett --num_batches=1
# --help lists what is installed, not plugins that do not exist here.
help=$("$CNNBENCH" --help)
# Every strategy plugin built here is listed; the MPI ones are built only with MPI.
devices="cpu"
[ -e "$CNNB_PLUGIN_DIR/libcnnb_device_cuda.so" ] && devices="cpu, cuda"
for want in "Installed here: $devices." "Exit status: 0 success; 2 bad input"; do
  grep -qF -- "$want" <<<"$help" || { echo "FAIL: --help lacks '$want'"; failures=$((failures + 1)); }
done
# Datasources other than synthetic (cifar10, imagenet) may be built too.
grep -qE -- "Installed here: ([a-z0-9_]+, )*synthetic[.,]" <<<"$(tr -s ' \n' ' ' <<<"$help")" ||
  { echo "FAIL: --help does not list the synthetic datasource"; failures=$((failures + 1)); }
installed=$(awk '/^  --variable_update /{on=1; next} on && /^  --/{exit} on' <<<"$help" | tr -s ' \n' ' ')
for strategy in independent horovod parameter_server replicated; do
  if [ -e "$CNNB_PLUGIN_DIR/libcnnb_strategy_$strategy.so" ]; then
    grep -qw -- "$strategy" <<<"$installed" || { echo "FAIL: --help does not list the built strategy '$strategy'"; failures=$((failures + 1)); }
  else
    ! grep -qw -- "$strategy" <<<"$installed" || { echo "FAIL: --help offers '$strategy', which is not built"; failures=$((failures + 1)); }
  fi
done
# (Help texts may name the cuda device, as --device's does for tf's "gpu": what is
# offered is the "Installed here" list.)
offered=$(tr -s ' \n' ' ' <<<"$help" | grep -oE "Installed here:[^.]*\." || true)
[ -e "$CNNB_PLUGIN_DIR/libcnnb_device_cuda.so" ] || ! grep -qw -- "cuda" <<<"$offered" \
  || { echo "FAIL: --help offers 'cuda', which no plugin provides"; failures=$((failures + 1)); }
# A report that cannot be written is a failure, not a silent success.
if [ -w /dev/full ]; then
  "$CNNBENCH" --num_batches=2 --num_warmup_batches=0 >/dev/full 2>"${TMPDIR:-/tmp}/cnnb_full.$$"; rc=$?
  err=$(cat "${TMPDIR:-/tmp}/cnnb_full.$$"); rm -f "${TMPDIR:-/tmp}/cnnb_full.$$"
  if [ "$rc" -ne 1 ] || ! grep -qF "writing to standard output failed: No space left on device" <<<"$err"; then
    echo "FAIL: report to /dev/full -> rc $rc: $err"; failures=$((failures + 1))
  fi
  "$CNNBENCH" --version >/dev/full 2>/dev/null && { echo "FAIL: --version to /dev/full exited 0"; failures=$((failures + 1)); }
fi
# Captured first: grep -q exits at the first match, and under pipefail the SIGPIPE that
# cnnbench then gets on its next write would fail the pipeline.
grep -q -- "--batch_size" <<<"$help" || { echo "FAIL: --help lacks --batch_size"; failures=$((failures + 1)); }
abi=$(sed -n 's/^#define CNNB_ABI_MAJOR \([0-9]*\).*/\1/p; s/^#define CNNB_ABI_MINOR \([0-9]*\).*/\1/p' "$CNNB_SOURCE_DIR/sdk/include/cnnb/abi.h" | paste -sd.)
"$CNNBENCH" --version | grep -qF "ABI $abi)" || { echo "FAIL: --version lacks the ABI"; failures=$((failures + 1)); }
[ "$failures" -eq 0 ] && echo "PASS" || exit 1
