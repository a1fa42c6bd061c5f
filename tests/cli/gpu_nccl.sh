#!/usr/bin/env bash
# Label gpu (tests/CMakeLists.txt: every cli/gpu_*.sh; cuda_fake in a tree built against
# the fake CUDA, below). The strategies' NCCL paths on a real GPU with the real NCCL
# (cli_strategy_nccl checks the same code against a recording stub everywhere). One GPU
# allows one rank per GPU, so on one GPU:
#  - replicated --all_reduce_spec=nccl with one GPU (a communicator of one: the whole call
#    path — communicator, groups, the all-reduces on the stream, the waits) and
#    parameter_server --local_parameter_device=gpu (NCCL reduce and broadcast, the update
#    on the GPU) train ResNet-20 (CIFAR-10, batch 8, 20 steps, fp32 without TF32) to the
#    loss curve of the cpu device, as cli_gpu_matches_cpu does (2e-3 * (1 + |loss|));
#    replicated's timeline shows the all-reduces were NCCL's;
#  - mpirun -np 2 horovod on the cuda device (lenet, batch 4 a rank, 4 steps) ends where
#    one process of batch 8 does (1e-4: summation order, fp32 without TF32), every rank
#    equal: on one GPU the two ranks share it, so auto takes the host path and says why;
#    on two or more each rank has its own and it is NCCL's;
#  - the NCCL fault path: two ranks on one GPU with --horovod_gpu_operations=nccl; NCCL
#    refuses them at its initialisation (or, if it runs them, they train): either way the
#    job ends within the bound, a refusal naming NCCL, and no process is left behind.
# With two or more GPUs also: replicated nccl over N GPUs of one process (lenet) ends where
# one GPU of N*b does, and under mpirun -np 2 (a GPU a rank, one communicator over both)
# a rank stopped mid-run (SIGSTOP) is named by rank 0 within twice --collective_timeout_s
# and the probe window. On any number of GPUs, one process of horovod on NCCL (a
# communicator of one; flat, hierarchical with its premultiplied sums, and compact bf16)
# ends where one process without a strategy does.
#
# On the fake CUDA (CNNB_CUDA_FAKE=1: a -DCNNB_CUDA_FAKE=ON tree, where the cuda device and
# libcnnb_nccl_impl.so run on the checking CPU fake, plugins/devices/cuda/fake) the same
# strategies run over the fake's GPUs ($CNNB_FAKE_CUDA_DEVICES, 2) with its NCCL, which
# computes the collectives across the communicators of one process and aborts on any
# misuse: the one-GPU comparison with the cpu device on fewer steps (reference-op
# convolutions are slow); replicated nccl over 2 GPUs (plain, nccl#3 and compact bf16) and
# parameter_server --local_parameter_device=gpu --num_gpus=2 against 1 x 2b; horovod under
# mpirun on one shared fake GPU (the host path), and the NCCL fault case refused, as the
# fake NCCL spans one process (so is the stopped-rank case, which is skipped).
# Skips (77), saying why, where the cuda device or NCCL cannot run.
set -uo pipefail
: "${CNNBENCH:?}" "${CNNB_PLUGIN_DIR:?}" "${CNNB_SOURCE_DIR:?}" "${TRAIN_PARAMS:?}" "${PARAMS_COMPARE:?}"
: "${CNNB_BUILD_DIR:?}"
list=$("$CNNBENCH" --list_plugins 2>&1)
grep -Eq "^  device +cuda +" <<<"$list" || { echo "SKIP: the cuda device is not built here"; exit 77; }
why=$(sed -n '/^Devices that cannot run on this machine:/,/^$/p' <<<"$list" | grep '^  cuda: ')
[ -z "$why" ] || { echo "SKIP: the cuda device cannot run here:${why#  cuda:}"; exit 77; }
[ -e "$CNNB_PLUGIN_DIR/nccl/libcnnb_nccl_impl.so" ] \
  || { echo "SKIP: the NCCL implementation is not built here (component NCCL off, or a sanitizer build)"; exit 77; }
for p in replicated parameter_server; do
  [ -e "$CNNB_PLUGIN_DIR/libcnnb_strategy_$p.so" ] || { echo "SKIP: strategy plugin $p not built"; exit 77; }
done
grep -Eq "^  device +cpu +" <<<"$list" \
  || { echo "SKIP: the cpu device is not built here (oneDNN missing): nothing to compare with"; exit 77; }
# shellcheck source=../support/mpi.sh
source "$CNNB_SOURCE_DIR/tests/support/mpi.sh"
dir=$(mktemp -d)
trap 'mpi_cleanup; rm -rf "$dir"' EXIT
unset CNNB_NCCL_LIBRARY # the real implementation
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
fake=false
[ "${CNNB_CUDA_FAKE:-0}" = 1 ] && fake=true
if $fake; then
  export CNNB_FAKE_CUDA_DEVICES=${CNNB_FAKE_CUDA_DEVICES:-2}
  gpus=$CNNB_FAKE_CUDA_DEVICES
  echo "the fake CUDA (CNNB_CUDA_FAKE=1): $gpus GPUs, NCCL within one process"
else
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
  if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then gpus=$(tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep -c .); fi
fi
[ "${gpus:-0}" -ge 1 ] || gpus=1
echo "GPUs visible: $gpus"

echo "== one GPU: replicated nccl and parameter_server on the GPU against the cpu device"
steps=20
$fake && steps=${CNNB_FAKE_NCCL_STEPS:-10} # reference-op convolutions on the CPU
common=(--model=resnet20 --data_name=cifar10 --batch_size=8 --num_batches="$steps" --num_warmup_batches=0
        --display_every=1 --init_learning_rate=0.005 --optimizer=momentum --seed=7)
losses() { grep -h '"record":"step"' "$1"/benchmark_run.rank0.jsonl | grep -o '"loss":[-0-9.eE+]*' | cut -d: -f2; }
run() { # run NAME ARGS...
  local name=$1; shift
  timeout 300 "$CNNBENCH" "${common[@]}" --benchmark_log_dir="$dir/$name" "$@" >"$dir/$name.out" 2>&1 \
    || { fail "cnnbench $* exited $?:"; grep -m3 error "$dir/$name.out"; return 1; }
}
compare() { # compare A B TOL
  paste <(losses "$dir/$1") <(losses "$dir/$2") | awk -v tol="$3" -v a="$1" -v b="$2" -v steps="$steps" '
    { n++; d = $1 - $2; if (d < 0) d = -d; m = $1 < 0 ? -$1 : $1
      printf "step %2d  %-10s %.6f  %-10s %.6f  |diff| %.2e\n", n, a, $1, b, $2, d
      if (d > tol * (1 + m) || $2 != $2) bad++ }
    END { if (n != steps) { print "want " steps " steps, got " n; exit 1 } exit bad > 0 }' | tail -n 3 \
    || fail "$2 does not follow $1 within $3 * (1 + |loss|)"
}
if run cpu --device=cpu; then
  if run nccl --device=cuda --nocuda_allow_tf32 --variable_update=replicated --all_reduce_spec=nccl \
       --replicated_timeline="$dir/t.json"; then
    compare cpu nccl 2e-3
    grep -q "replicated: NCCL 2\.[0-9.]* (CUDA runtime [0-9.]*) on GPU 0; one communicator set of 1 GPUs" "$dir/nccl.out" \
      || { fail "replicated did not say it runs NCCL on GPU 0:"; grep "replicated:" "$dir/nccl.out"; }
    grep -q '"how": "NCCL avg fp32"' "$dir/t.rank0.json" || fail "the timeline shows no NCCL all-reduce"
  fi
  if run psgpu --device=cuda --nocuda_allow_tf32 --variable_update=parameter_server \
       --local_parameter_device=gpu; then
    compare cpu psgpu 2e-3
    grep -q "parameter server on the first replica's GPU" "$dir/psgpu.out" || fail "parameter_server did not say so"
  fi
fi

export CNNB_PLUGIN_PATH="$CNNB_BUILD_DIR/fixtures/data"
small_steps=4
$fake && small_steps=2 # lenet's steps take seconds each on the fake
small=(--model=lenet --datasource=sequence --num_intra_threads=1 --num_warmup_batches=0
       --num_batches="$small_steps" --optimizer=momentum --init_learning_rate=0.01 --device=cuda
       --nocuda_allow_tf32)
CNNB_PARAMS_OUT="$dir/ref8" "$TRAIN_PARAMS" "${small[@]}" --batch_size=8 >"$dir/ref8.out" 2>&1 \
  || fail "1 process of batch 8: $(grep -m1 error "$dir/ref8.out")"

echo "== one process of horovod on NCCL (a communicator of one GPU)"
if [ ! -e "$CNNB_PLUGIN_DIR/libcnnb_strategy_horovod.so" ]; then
  echo "(skipped: no horovod plugin: a build without MPI)"
else
  for mode in flat hier compact; do
    extra=()
    [ $mode = hier ] && extra=(--horovod_hierarchical_allreduce)
    [ $mode = compact ] && extra=(--compact_gradient_transfer)
    CNNB_PARAMS_OUT="$dir/hvd1_$mode" "$TRAIN_PARAMS" "${small[@]}" --batch_size=8 --variable_update=horovod \
      --horovod_gpu_operations=nccl "${extra[@]}" >"$dir/hvd1_$mode.out" 2>&1 \
      || { fail "1 process of horovod $mode on NCCL: $(grep -m1 error "$dir/hvd1_$mode.out")"; continue; }
    grep -q "on the GPU by NCCL" "$dir/hvd1_$mode.out" \
      || { fail "horovod $mode in one process did not take NCCL"; grep horovod: "$dir/hvd1_$mode.out"; }
    tol=1e-5
    [ $mode = compact ] && tol=3e-3 # bf16 copies of the gradients
    "$PARAMS_COMPARE" $tol "$dir/ref8.0.0" "$dir/hvd1_$mode.0.0" >/dev/null \
      || fail "1 process of horovod $mode on NCCL differs from 1 process without it beyond $tol"
  done
fi

echo "== mpirun -np 2 horovod on the cuda device"
if ! command -v mpirun >/dev/null 2>&1; then
  fail "mpirun not found (apt-get install openmpi-bin): the horovod and fault cases did not run"
else
  # The fake NCCL spans one process: on the fake the two ranks share its one GPU and take
  # the host path, as on one real GPU.
  hvd_gpus=$gpus
  $fake && hvd_gpus=1
  CNNB_FAKE_CUDA_DEVICES=$hvd_gpus CNNB_PARAMS_OUT="$dir/hvd" mpi_run_bounded 300 2 "$TRAIN_PARAMS" \
    "${small[@]}" --batch_size=4 --variable_update=horovod >"$dir/hvd.out" 2>&1 \
    || fail "mpirun -np 2 horovod: $(grep -m1 error "$dir/hvd.out")"
  if [ "$hvd_gpus" -eq 1 ]; then
    grep -q "staged through host memory (ranks 0 and 1 share GPU 0" "$dir/hvd.out" \
      || { fail "horovod on one shared GPU did not take the host path saying why"; grep horovod: "$dir/hvd.out"; }
  else
    grep -q "on the GPU by NCCL" "$dir/hvd.out" || { fail "horovod on 2 GPUs did not take NCCL"; grep horovod: "$dir/hvd.out"; }
  fi
  "$PARAMS_COMPARE" 1e-4 "$dir/ref8.0.0" "$dir/hvd.0.0" "$dir/hvd.1.0" || fail "horovod differs from 1 x batch 8"
  "$PARAMS_COMPARE" 0 "$dir/hvd.0.0" "$dir/hvd.1.0" >/dev/null || fail "horovod: the ranks' parameters differ"

  echo "== the NCCL fault path: two ranks on one GPU, NCCL asked for"
  start=$SECONDS
  one=${CUDA_VISIBLE_DEVICES:-0}
  CNNB_FAKE_CUDA_DEVICES=1 CUDA_VISIBLE_DEVICES=${one%%,*} mpi_run_bounded 120 2 "$CNNBENCH" "${small[@]}" \
    --batch_size=4 --num_batches=20 --variable_update=horovod --horovod_gpu_operations=nccl \
    --collective_timeout_s=10 >"$dir/dup.out" 2>&1
  rc=$? took=$((SECONDS - start))
  if $fake; then # refused at once on both ranks, not at a timeout
    [ $rc -ne 0 ] || fail "the fake NCCL ran a communicator across two processes"
    [ $took -le 30 ] || fail "two ranks on the fake NCCL took $took s to be refused"
    grep -q "NCCL: .*the fake NCCL spans one process" "$dir/dup.out" \
      || { fail "the refusal does not say the fake NCCL spans one process:"; grep -m3 error "$dir/dup.out"; }
    echo "ok: exit $rc after $took s: $(grep -m1 -o 'NCCL: .*' "$dir/dup.out" | cut -c1-160)"
  elif [ $rc -eq 0 ]; then
    echo "note: this NCCL ran two ranks on one GPU; the refusal is not checked"
  else
    [ $rc -ne 137 ] || fail "two ranks on one GPU with NCCL hung (killed after 120 s)"
    [ $took -le 60 ] || fail "two ranks on one GPU with NCCL took $took s to end"
    grep -q "NCCL: " "$dir/dup.out" || { fail "the refusal does not name NCCL:"; grep -m3 error "$dir/dup.out"; }
    echo "ok: exit $rc after $took s: $(grep -m1 -o 'NCCL: .*' "$dir/dup.out" | cut -c1-160)"
  fi
  for _ in $(seq 20); do [ -z "$(mpi_pids)" ] && break; sleep 0.5; done
  [ -z "$(mpi_pids)" ] || fail "processes left behind: $(mpi_pids)"
fi

echo "== two or more GPUs"
if [ "$gpus" -lt 2 ]; then
  echo "(skipped: $gpus GPU visible; replicated nccl over several GPUs and the stopped rank need 2)"
else
  n=$gpus
  [ "$n" -gt 8 ] && n=8
  CNNB_PARAMS_OUT="$dir/refn" "$TRAIN_PARAMS" "${small[@]}" --batch_size=$((4 * n)) >/dev/null 2>&1
  CNNB_PARAMS_OUT="$dir/repn" "$TRAIN_PARAMS" "${small[@]}" --batch_size=4 --num_gpus=$n \
    --variable_update=replicated --all_reduce_spec=nccl >"$dir/repn.out" 2>&1 \
    || fail "replicated nccl over $n GPUs: $(grep -m1 error "$dir/repn.out")"
  files=("$dir"/repn.0.*)
  "$PARAMS_COMPARE" 1e-4 "$dir/refn.0.0" "${files[@]}" || fail "replicated nccl over $n GPUs differs from 1 x $((4 * n))"
  "$PARAMS_COMPARE" 0 "$dir/repn.0.0" "${files[@]}" >/dev/null || fail "the $n GPUs' parameters differ"
  # The other spellings of NCCL over the process's GPUs: pieces of a bucket (nccl#3), bf16
  # copies of the gradients, and the parameter server on the first GPU (NCCL reduce and
  # broadcast), each against 1 x n*b.
  for run in "nccl3|1e-4|--variable_update=replicated --all_reduce_spec=nccl#3" \
             "compact|3e-3|--variable_update=replicated --all_reduce_spec=nccl --compact_gradient_transfer" \
             "psgpun|1e-4|--variable_update=parameter_server --local_parameter_device=gpu"; do
    IFS='|' read -r name tol args <<<"$run"
    # shellcheck disable=SC2086 # args is words
    CNNB_PARAMS_OUT="$dir/$name" "$TRAIN_PARAMS" "${small[@]}" --batch_size=4 --num_gpus="$n" $args \
      >"$dir/$name.out" 2>&1 || { fail "$args over $n GPUs: $(grep -m1 error "$dir/$name.out")"; continue; }
    files=("$dir/$name".0.*)
    [ "${#files[@]}" -eq "$n" ] || fail "$name: ${#files[@]} replicas' parameters, want $n"
    "$PARAMS_COMPARE" "$tol" "$dir/refn.0.0" "${files[@]}" >/dev/null \
      || fail "$args over $n GPUs differs from 1 x $((4 * n)) beyond $tol"
    "$PARAMS_COMPARE" 0 "$dir/$name.0.0" "${files[@]}" >/dev/null || fail "$name: the GPUs' parameters differ"
  done
  grep -q "parameter server on the first replica's GPU" "$dir/psgpun.out" || fail "parameter_server did not say so"
  if $fake; then
    echo "(the stopped rank needs NCCL across processes, which the fake does not span: skipped)"
  elif command -v mpirun >/dev/null 2>&1; then
    echo "-- mpirun -np 2, one communicator over both ranks' GPUs, rank 1 stopped mid-run"
    (mpi_run_bounded 300 2 "$CNNBENCH" "${small[@]}" --batch_size=16 --num_batches=100000 --display_every=10 \
       --variable_update=replicated --all_reduce_spec=nccl --collective_timeout_s=10 >"$dir/stop.out" 2>&1
     echo $? >"$dir/stop.rc") &
    victim=
    for _ in $(seq 600); do
      victim=$(mpi_rank_pid 1)
      [ -n "$victim" ] && grep -q "^20	images/sec" "$dir/stop.out" 2>/dev/null && break
      sleep 0.1
    done
    if [ -z "$victim" ]; then
      fail "no steps of the 2-rank nccl job after 60 s"
    else
      kill -STOP "$victim"
      start=$SECONDS
      wait
      took=$((SECONDS - start))
      [ "$(cat "$dir/stop.rc")" != 0 ] || fail "the job with a stopped rank exited 0"
      [ $took -le $((2 * 10 + 3 + 20)) ] || fail "the job took $took s to end"
      grep -q "rank 1 stopped answering" "$dir/stop.out" \
        || { fail "rank 0 did not name rank 1:"; grep -m3 error "$dir/stop.out"; }
    fi
  fi
fi

[ "$failures" -eq 0 ] && echo "PASS: gpu_nccl" || exit 1
