#!/usr/bin/env bash
# Too big for this machine: under an address-space limit (prlimit --as, RLIMIT_AS) every
# run either trains or exits 1 with an out-of-memory message naming what could not be
# allocated, never a signal. (Issue 7: with room for the activation arena but not much
# more, oneDNN's JIT assembler wrote kernels through a NULL code buffer and cnnbench died
# with SIGSEGV inside dnnl_primitive_create; a little higher, a C++ allocation failing in
# an OpenMP worker during the first step aborted it; lower, libgomp exited on its own.)
#
# How much address space a run needs depends on the machine (its libraries; its core
# count, which sets the OpenMP threads' stacks and malloc arenas), so no limit here is a
# constant. The threads are fixed (--num_intra_threads=2) and each scan walks up from a
# limit too low for anything, every few MiB, to the first limit under which the run
# trains: through the activation arena failing, the window where the crashes were (node
# preparation, ~25 MiB wide here), the input pipeline and the first step. Each run must
# end cleanly whichever allocation its limit lands on, so nothing depends on where
# exactly each one falls.
set -uo pipefail
: "${CNNBENCH:?}"
# AddressSanitizer reserves terabytes of shadow memory at start: under RLIMIT_AS the
# binary cannot even start. tests/CMakeLists.txt sets CNNB_SANITIZE=1 for such builds;
# the symbols say it too (captured first: grep -q would leave nm a SIGPIPE, and pipefail).
syms=$(nm "$CNNBENCH" 2>/dev/null; ldd "$CNNBENCH" 2>/dev/null)
if [ "${CNNB_SANITIZE:-0}" = 1 ] || grep -qE " __asan_init|libasan" <<<"$syms"; then
  echo "SKIP: built with AddressSanitizer, whose shadow memory defeats RLIMIT_AS"; exit 77
fi
command -v prlimit >/dev/null || { echo "SKIP: no prlimit (util-linux)"; exit 77; }
export OMP_WAIT_POLICY=passive # spinning OpenMP barriers crawl on a busy machine

failures=0
base=(--model=resnet20 --data_name=cifar10 --batch_size=8 --num_batches=1
      --num_warmup_batches=0 --num_intra_threads=2)
run() { # run <limit MiB> args...: sets rc and err (stderr)
  local mib=$1; shift
  err=$(prlimit --as=$((mib * 1048576)) "$CNNBENCH" "$@" 2>&1 >/dev/null); rc=$?
}
fail() { echo "FAIL: $*"; tail -3 <<<"$err"; failures=$((failures + 1)); }

scan() { # scan <step MiB> args...: from 32 MiB up to the first limit that trains
  local step=$1 mib arena=0 prepare=0 runs=0; shift
  for ((mib = 32; mib <= 4096; mib += step)); do
    run "$mib" "$@"
    # Below the libraries' own size the cpu plugin cannot even be mapped (the loader
    # names the file; no device offers 'cpu', exit 2): no cnnbench code has run yet.
    if [ "$rc" -eq 2 ] && grep -q "cannot be loaded" <<<"$err" && [ "$arena" -eq 0 ]; then continue; fi
    if [ "$rc" -eq 0 ]; then
      need=$mib arenas=$arena prepares=$prepare
      echo "ok: cnnbench $* trains from $mib MiB; below, $runs runs ran out of memory cleanly"
      return
    fi
    runs=$((runs + 1))
    if [ "$rc" -ne 1 ] || ! grep -q "out of memory" <<<"$err"; then
      fail "prlimit --as=${mib}MiB cnnbench $* -> rc $rc (want 0, or 1 out of memory)"
    fi
    grep -q "activation arena" <<<"$err" && arena=$((arena + 1))
    grep -q "preparing of node" <<<"$err" && prepare=$((prepare + 1))
  done
  fail "cnnbench $* does not train in 4 GiB"; exit 1
}

scan 4 "${base[@]}"
# The scan came up through the arena failing and the window of the crash.
[ "$arenas" -gt 0 ] || fail "no run of the scan failed at the activation arena"
[ "$prepares" -gt 0 ] || fail "no run of the scan failed preparing a node"
# Inference: other kernels, fewer buffers; at batch 128 the dense layer's GEMM kernels
# are generated in the first step, often by the OpenMP worker.
scan 6 "${base[@]}" --forward_only --batch_size=128
run 4096 "${base[@]}" --precision=bf16 # where the CPU has bf16 (else exit 2 says so)
[ "$rc" -eq 0 ] && scan 8 "${base[@]}" --precision=bf16

expect() { # expect <message substring> <limit MiB> args...: rc 1 and the message
  local want=$1; shift
  run "$@"
  [ "$rc" -eq 1 ] && grep -qF -- "$want" <<<"$err" ||
    fail "prlimit --as=$1MiB cnnbench ${*:2} -> rc $rc (want 1 and '$want')"
}
# Far too big: whichever of its buffers fails first, it says what, with the hint.
expect "a smaller --batch_size needs less" $((need + 64)) "${base[@]}" --batch_size=200000
grep -q "cpu: .*out of memory: cannot allocate [0-9]* bytes" <<<"$err" ||
  fail "the message does not say what could not be allocated"
# Too many threads for the address space: their stacks, checked before libgomp makes
# them (it would print "Thread creation failed" and exit). OMP_STACKSIZE pins their size.
# As many threads as --num_intra_threads allows here (4 per core), with stacks too big.
threads=$(( 4 * $(nproc) ))
OMP_STACKSIZE=1G expect "stacks of $((threads - 1)) OpenMP thread" $((need + 64)) "${base[@]}" \
  --num_intra_threads=$threads

[ "$failures" -eq 0 ] && echo "PASS" || exit 1
