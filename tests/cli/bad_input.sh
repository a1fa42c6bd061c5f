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
expect 2 "--data_name=mnist: unknown dataset" -- --data_name=mnist
expect 2 "--num_gpus=0" -- --num_gpus=0
expect 2 "--batch_size=-4" -- --batch_size=-4
expect 2 "unexpected argument 'resnet50'" -- resnet50
expect 2 "--use_fp16 contradicts --precision=bf16" -- --use_fp16 --precision=bf16
expect 2 "fp16 is not supported" -- --precision=fp16 --num_batches=1
# Captured first: grep -q exits at the first match, and under pipefail the SIGPIPE that
# cnnbench then gets on its next write would fail the pipeline.
grep -q -- "--batch_size" <<<"$("$CNNBENCH" --help)" || { echo "FAIL: --help lacks --batch_size"; failures=$((failures + 1)); }
abi=$(sed -n 's/^#define CNNB_ABI_MAJOR \([0-9]*\).*/\1/p; s/^#define CNNB_ABI_MINOR \([0-9]*\).*/\1/p' "$CNNB_SOURCE_DIR/sdk/include/cnnb/abi.h" | paste -sd.)
"$CNNBENCH" --version | grep -qF "ABI $abi)" || { echo "FAIL: --version lacks the ABI"; failures=$((failures + 1)); }
[ "$failures" -eq 0 ] && echo "PASS" || exit 1
