#!/usr/bin/env bash
# Label gpu / cuda_fake (tests/CMakeLists.txt: every cli/gpu_*.sh). The cuda plugin's probe
# of the NVIDIA driver names what stops it before the CUDA runtime would fail later: a
# driver older than the build's CUDA runtime needs (CUDA 13: release 580), and no GPU
# visible. Both are played by the fake CUDA's driver (CNNB_FAKE_CUDA_DRIVER_VERSION,
# CNNB_FAKE_CUDA_DEVICES), so this runs only in a -DCNNB_CUDA_FAKE=ON tree and skips
# elsewhere, saying why: a real machine has the driver it has.
set -uo pipefail
: "${CNNBENCH:?}"
[ "${CNNB_CUDA_FAKE:-0}" = 1 ] || { echo "SKIP: plays old drivers through the fake CUDA only (a -DCNNB_CUDA_FAKE=ON tree)"; exit 77; }
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# refused <want> <env...>: --list_plugins gives the reason, --device=cuda exits 2 with it.
refused() {
  local want=$1 list err rc; shift
  list=$(env "$@" timeout 60 "$CNNBENCH" --list_plugins 2>&1)
  grep -A1 '^  cuda: ' <<<"$list" | grep -qF -- "$want" ||
    fail "$*: --list_plugins does not say '$want': $(grep -A1 '^  cuda: ' <<<"$list")"
  err=$(env "$@" timeout 60 "$CNNBENCH" --device=cuda --model=trivial --batch_size=2 \
    --num_batches=1 2>&1 >/dev/null); rc=$?
  [ "$rc" -eq 2 ] || fail "$*: --device=cuda exited $rc (want 2): $err"
  grep -qF -- "$want" <<<"$err" || fail "$*: --device=cuda does not say '$want': $err"
  echo "$*: $(grep -m1 'error:' <<<"$err")"
}

refused "supports CUDA 12.4, older than 580, which this build (CUDA 13.0 runtime) needs" \
  CNNB_FAKE_CUDA_DRIVER_VERSION=12040
refused "no CUDA device visible" CNNB_FAKE_CUDA_DEVICES=0
# A driver of the runtime's own major version (any minor) runs it.
env CNNB_FAKE_CUDA_DRIVER_VERSION=13000 timeout 120 "$CNNBENCH" --device=cuda --model=trivial \
  --batch_size=2 --num_batches=1 --image_size=32 >/dev/null 2>&1 ||
  fail "a CUDA 13.0 driver was refused"
[ "$failures" -eq 0 ] && echo "PASS: gpu_driver_probe" || exit 1
