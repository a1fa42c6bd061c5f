#!/usr/bin/env bash
# The cuda device on a machine that cannot run it (no NVIDIA driver, no GPU, or a build
# without its implementation): the plugin still loads, --list_plugins lists it and says
# why it cannot run here, and --device=cuda exits 2 with one error line saying what is
# missing: never a crash or a hang. On a machine with a usable GPU this test skips (the
# gpu-labelled tests cover that machine).
set -uo pipefail
: "${CNNBENCH:?}" "${CNNB_PLUGIN_DIR:?}"
plugin="$CNNB_PLUGIN_DIR/libcnnb_device_cuda.so"
impl="$CNNB_PLUGIN_DIR/cuda/libcnnb_cuda_impl.so"
[ -e "$plugin" ] || { echo "SKIP: the cuda device is not built here (no CUDA toolkit and cuDNN at configure time)"; exit 77; }
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

list=$(timeout 60 "$CNNBENCH" --list_plugins 2>&1); rc=$?
[ "$rc" -eq 0 ] || fail "--list_plugins exited $rc: $list"
grep -Eq "^  device +cuda +" <<<"$list" || fail "--list_plugins does not list the cuda device as accepted: $list"
why=$(sed -n '/^Devices that cannot run on this machine:/,/^$/p' <<<"$list" | grep '^  cuda: ' || true)
if [ -z "$why" ]; then
  echo "SKIP: --list_plugins says the cuda device can run here (a GPU is usable); this test checks the refusal"
  exit 77
fi
echo "--list_plugins: $why"

# What the reason must say, from what this machine lacks.
if [ ! -e "$impl" ]; then
  want="built without its implementation"
else
  want="no NVIDIA driver: libcuda.so.1 cannot be loaded"
  ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 ' && want="" # a driver without a GPU: any reason
fi
[ -z "$want" ] || grep -qF -- "$want" <<<"$why" || fail "--list_plugins' reason lacks '$want': $why"

# One error line, exit 2, the same reason; also when a precision flag asks for fp16 (the
# refusal is about the machine, not the precision), and with several replicas.
for args in "" "--use_fp16" "--precision=bf16 --num_gpus=2" "--forward_only"; do
  # shellcheck disable=SC2086 # args are words
  err=$(timeout 60 "$CNNBENCH" --device=cuda --model=trivial --batch_size=2 --num_batches=1 $args 2>&1 >/dev/null); rc=$?
  [ "$rc" -eq 2 ] || fail "--device=cuda $args exited $rc (want 2): $err"
  lines=$(grep -c "error:" <<<"$err")
  [ "$lines" -eq 1 ] || fail "--device=cuda $args printed $lines error lines (want 1): $err"
  grep -qF -- "--device=cuda cannot run on this machine: ${why#  cuda: }" <<<"$err" \
    || fail "--device=cuda $args does not give --list_plugins' reason: $err"
done

# The toolkit's stub driver on the library path (what a container without the driver's
# mount has): the driver's failure is named, not a crash.
stub=""
for f in /usr/local/cuda/lib64/stubs/libcuda.so /usr/local/cuda/targets/*/lib/stubs/libcuda.so; do
  [ -e "$f" ] && { stub=$f; break; }
done
if [ -n "$stub" ] && [ -e "$impl" ]; then
  dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
  ln -s "$stub" "$dir/libcuda.so.1"
  err=$(LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" timeout 60 "$CNNBENCH" --device=cuda \
        --model=trivial --batch_size=2 --num_batches=1 2>&1 >/dev/null); rc=$?
  [ "$rc" -eq 2 ] || fail "with the stub libcuda.so.1: exit $rc (want 2): $err"
  grep -qF "CUDA_ERROR_STUB_LIBRARY" <<<"$err" || fail "with the stub libcuda.so.1: the reason does not name the stub: $err"
else
  echo "note: no stub libcuda.so in the CUDA toolkit or no implementation built: the stub case is not checked"
fi

# The conformance suites for cuda skip, saying why, rather than fail.
ops="${CNNB_BUILD_DIR:-}/bin/test_device_ops"
if [ -x "$ops" ]; then
  out=$(timeout 120 "$ops" cuda 2>&1); rc=$?
  [ "$rc" -eq 77 ] || fail "test_device_ops cuda exited $rc (want 77, skipped): $out"
  grep -qF "cannot run on this machine" <<<"$out" || fail "test_device_ops cuda does not say why it skips: $out"
fi

[ "$failures" -eq 0 ] && echo "PASS: cuda_unavailable" || exit 1
