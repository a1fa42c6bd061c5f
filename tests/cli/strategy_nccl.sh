#!/usr/bin/env bash
# The strategies' NCCL paths without a GPU: the production code (replicated's nccl ranges,
# horovod's and parameter_server's GPU paths, common/nccl_gpus.c) driving the recording
# stub of the NCCL table (fixtures/nccl_stub.c, loaded through $CNNB_NCCL_LIBRARY) on the
# fixture_gpu device (the cpu device giving CUDA streams):
#  - the call sequence, exactly: for every --all_reduce_spec form (nccl, nccl#3, nccl:64k:
#    pscpu, pscpu:64k:nccl, nccl/xring, nccl with --gradient_repacking=2 and with
#    --compact_gradient_transfer) the stub's log must be what the buckets the strategy
#    announced imply — the communicators made in one group, then per bucket one group of
#    one all-reduce per GPU (its count, type, op, stream, in place), the 16-bit conversions
#    around it, the wait (an event per stream) before a staged range and at the end of
#    each step, the communicators finalised and destroyed at the end;
#  - the numbers, where the stub can do them (every GPU in one process): N = 2 and 4
#    replicas of batch b end where 1 replica of N*b does (1e-5, as cli_strategy_replicated),
#    every replica bit for bit the same; compact bf16 copies within 3e-3 and not equal to
#    fp32; parameter_server --local_parameter_device=gpu for momentum, sgd and rmsprop;
#  - under mpirun -np 2 (real MPI, the stub coupling the ranks through a shared directory):
#    one communicator over both ranks' GPUs with rank 0's unique id broadcast, nccl/xring's
#    NCCL-MPI-NCCL (numbers checked: its NCCL parts are within one process), horovod flat,
#    hierarchical and compact, horovod --horovod_gpu_operations=mpi through host memory, and
#    auto taking the host path when two ranks share a GPU;
#  - faults: a rank that stops mid-step (stub "stop") ends the job within the bound, rank 0
#    naming rank 1 and aborting its communicators; a GPU that hangs (stub "hang") and a
#    remote error (stub "error") end a one-process run with exit 1 saying so;
#  - refusals in one line, exit 2: a machine without a GPU through the real implementation
#    (when it is built: the plugin that links NCCL loads here and refuses at create, naming
#    the missing driver or GPU, never "built without NCCL"), the stub saying unavailable, a
#    $CNNB_NCCL_LIBRARY that is not there, parameter_server's gpu variables under mpirun,
#    horovod's nccl on the cpu device (also as tf's --horovod_device=gpu), a bad
#    --horovod_gpu_operations or --horovod_device, the two disagreeing.
# In a tree built against the fake CUDA (CNNB_CUDA_FAKE=1) the real implementation runs on
# the fake, which has GPUs: there, fixture_gpu's streams and host memory given to it must
# end the run at the first ncclAllReduce with the fake's abort naming them (the fake is a
# checker), and the implementation links the fake instead of NCCL. cli_gpu_nccl runs the
# strategies on the fake's cuda device.
set -euo pipefail
: "${TRAIN_PARAMS:?}" "${PARAMS_COMPARE:?}" "${CNNB_BUILD_DIR:?}" "${CNNB_PLUGIN_DIR:?}"
: "${CNNB_SOURCE_DIR:?}" "${CNNBENCH:?}"
stub="$CNNB_BUILD_DIR/fixtures/nccl/libnccl_stub.so"
[ -e "$stub" ] || { echo "SKIP: the NCCL stub fixture is not built"; exit 77; }
[ -e "$CNNB_PLUGIN_DIR/libcnnb_strategy_replicated.so" ] \
  || { echo "SKIP: strategy plugin replicated not built"; exit 77; }
# shellcheck source=../support/mpi.sh
source "$CNNB_SOURCE_DIR/tests/support/mpi.sh"

work=$(mktemp -d)
trap 'mpi_cleanup; rm -rf "$work"' EXIT
export CNNB_PLUGIN_PATH="$CNNB_BUILD_DIR/fixtures/gpu:$CNNB_BUILD_DIR/fixtures/data"
export CNNB_NCCL_LIBRARY=$stub
B=4 K=3
# lenet's arena: its 2173353 parameters, each starting on a 256-byte boundary (what one
# NCCL call of the parameter server's, or a step's horovod all-reduces, cover).
ARENA=2173417
common=(--model=lenet --num_batches=$K --num_warmup_batches=0 --optimizer=momentum
        --init_learning_rate=0.01 --num_intra_threads=1 --datasource=sequence --log_level=debug)
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# train NAME ARGS...: train_params writing $work/NAME.<rank>.<replica>, its log NAME.log and
# the stub's NAME.stub.<rank>.
train() {
  local name=$1; shift
  CNNB_NCCL_STUB_LOG="$work/$name-stub" CNNB_PARAMS_OUT="$work/$name" "$TRAIN_PARAMS" \
    "${common[@]}" "$@" >"$work/$name.log" 2>&1 \
    || { fail "$name exited $?:"; tail -n 5 "$work/$name.log"; return 1; }
}
# matches NAME REF [TOL]: every replica of NAME within TOL of REF, and all equal.
matches() {
  local name=$1 ref=$2 tol=${3:-1e-5} files
  files=("$work/$name".*.[0-9])
  "$PARAMS_COMPARE" "$tol" "$work/$ref.0.0" "${files[@]}" >/dev/null \
    || { fail "$name differs from $ref beyond $tol"; "$PARAMS_COMPARE" "$tol" "$work/$ref.0.0" "${files[@]}" | tail -n 2; }
  "$PARAMS_COMPARE" 0 "$work/$name.0.0" "${files[@]}" >/dev/null \
    || fail "$name: the replicas are not bit-identical"
}
# calls FILE: the stub's log, communicators renamed C1, C2, ... in order of appearance
# (their ids are random).
calls() {
  awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^(comm|id)=/) {
           split($i, kv, "="); split(kv[2], tr, ":")
           if (!(tr[1] in name)) name[tr[1]] = "C" (++n)
           $i = kv[1] "=" name[tr[1]] (tr[2] != "" ? ":" tr[2] : "") }
         print }' "$1"
}
# buckets NAME: what the strategy announced at step 1, "count alg shards" a line.
buckets() {
  sed -n 's/.*replicated: debug: gradients \[[0-9]*, [0-9]*) (\([0-9]*\) elements) by \([a-z]*\)#\([0-9]*\)$/\1 \2 \3/p' "$work/$1.log"
}
# expect N COMPACT CROSS < buckets: the calls one process of N GPUs must make in K steps.
# COMPACT: "" or the 16-bit type; CROSS: world (one communicator over everyone) or mpi
# (nccl/xring across 2 ranks: this rank's part; RANK=0 or 1).
expect() {
  awk -v n="$1" -v compact="$2" -v cross="$3" -v k=$K -v rank="${RANK:-0}" -v world="${WORLD:-1}" '
    function events(   i) { for (i = 0; i < n; i++) printf "event_record stream=%d\n", first + i }
    function group(what, count, type, op, root,   i) {
      print "group_start"
      for (i = 0; i < n; i++)
        printf "%s comm=C1:%d count=%d type=%s%s%s stream=%d in_place\n", what, comm0 + i, count,
               type, op != "" ? " op=" op : "", root != "" ? " root=" root : "", first + i
      print "group_end" }
    { count[NR] = $1; alg[NR] = $2; shards[NR] = $3 }
    END {
      first = rank * n
      comm0 = cross == "world" ? rank * n : 0
      size = cross == "world" ? n * world : n
      for (i = 0; i < n; i++) printf "event_create ordinal=%d\n", first + i
      if (cross != "world" || rank == 0) print "get_unique_id id=C1"
      print "group_start"
      for (i = 0; i < n; i++)
        printf "comm_init_rank comm=C1:%d nranks=%d ordinal=%d grouped\n", comm0 + i, size, first + i
      print "group_end"
      for (s = 1; s <= k; s++) {
        pending = 0
        for (b = 1; b <= NR; b++) {
          c = count[b]
          if (alg[b] != "nccl") { if (pending) events(); pending = 0; continue }
          if (cross == "mpi") {
            group("reduce", c, "fp32", "sum", 0); events()
            group("broadcast", c, "fp32", "", 0); pending = 1; continue }
          if (compact != "")
            for (i = 0; i < n; i++)
              printf "convert stream=%d from=fp32 to=%s count=%d scale=1\n", first + i, compact, c
          print "group_start"
          for (p = 0; p < shards[b]; p++) {
            lo = int(c * p / shards[b]); hi = int(c * (p + 1) / shards[b])
            for (i = 0; i < n && hi > lo; i++)
              printf "all_reduce comm=C1:%d count=%d type=%s op=avg stream=%d in_place\n",
                     comm0 + i, hi - lo, compact != "" ? compact : "fp32", first + i }
          print "group_end"
          if (compact != "")
            for (i = 0; i < n; i++)
              printf "convert stream=%d from=%s to=fp32 count=%d scale=1\n", first + i, compact, c
          pending = 1
        }
        if (pending) events()
      }
      for (i = 0; i < n; i++) printf "comm_finalize comm=C1:%d\n", comm0 + i
      for (i = 0; i < n; i++) printf "comm_destroy comm=C1:%d\n", comm0 + i
    }'
}
# sequence NAME N [COMPACT [CROSS [STUBFILE]]]: the stub's calls are exactly expect's.
sequence() {
  local name=$1 n=$2 compact=${3:-} cross=${4:-world} file=${5:-$work/$1-stub.0}
  buckets "$name" >"$work/$name.buckets"
  [ -s "$work/$name.buckets" ] || { fail "$name: no bucket lines in its log"; return; }
  expect "$n" "$compact" "$cross" <"$work/$name.buckets" >"$work/$name.want"
  calls "$file" >"$work/$name.got"
  diff -u "$work/$name.want" "$work/$name.got" >"$work/$name.diff" \
    || { fail "$name: the NCCL calls differ from what its buckets imply:"; head -n 30 "$work/$name.diff"; }
}

CNNB_PARAMS_OUT="$work/ref2" "$TRAIN_PARAMS" "${common[@]}" --batch_size=$((2 * B)) >/dev/null 2>&1
CNNB_PARAMS_OUT="$work/ref4" "$TRAIN_PARAMS" "${common[@]}" --batch_size=$((4 * B)) >/dev/null 2>&1
rep=(--batch_size=$B --device=fixture_gpu --variable_update=replicated)

echo "== replicated, one process: every spec form's calls and numbers"
for run in "2|nccl" "4|nccl" "2|nccl#3" "2|nccl:64k:pscpu --gradient_bucket_mb=0.05" \
           "4|pscpu:64k:nccl --gradient_bucket_mb=0.05" "2|nccl/xring" \
           "2|nccl --gradient_repacking=2" "2|nccl#2 --gradient_bucket_mb=0.05"; do
  n=${run%%|*} spec=${run#*|}
  name="n${n}_$(tr -c 'a-z0-9' _ <<<"$spec")"
  # shellcheck disable=SC2086 # spec is words
  train "$name" "${rep[@]}" --num_gpus="$n" --all_reduce_spec=$spec || continue
  echo "-- $n GPUs, --all_reduce_spec=$spec: $(wc -l <"$work/$name-stub.0") calls"
  sequence "$name" "$n"
  matches "$name" "ref$n"
done
# The split specs used both sides (their bucket lines name both algorithms).
for name in n2_nccl_64k_pscpu___gradient_bucket_mb_0_05_ n4_pscpu_64k_nccl___gradient_bucket_mb_0_05_; do
  grep -q " nccl " "$work/$name.buckets" && grep -q " pscpu " "$work/$name.buckets" \
    || fail "$name did not use both nccl and pscpu: $(cat "$work/$name.buckets")"
done
# pscpu:64k:nccl reduces its large buckets by NCCL first: its staged pscpu buckets must
# wait for them (the events before them), which the expected sequence holds.
grep -q "event_record" "$work/n4_pscpu_64k_nccl___gradient_bucket_mb_0_05_.want" || fail "no wait expected"

echo "-- --compact_gradient_transfer: bf16 copies on the GPU"
train compact "${rep[@]}" --num_gpus=2 --all_reduce_spec=nccl --compact_gradient_transfer \
  && { sequence compact 2 bf16; matches compact ref2 3e-3
       ! "$PARAMS_COMPARE" 1e-6 "$work/n2_nccl_.0.0" "$work/compact.0.0" >/dev/null \
         || fail "compact transfer gave fp32's parameters: was it in effect?"; }

echo "-- parameter_server --local_parameter_device=gpu"
for optimizer in momentum sgd rmsprop; do
  common_ps=("${rep[@]/replicated/parameter_server}" --num_gpus=2 --local_parameter_device=gpu)
  CNNB_PARAMS_OUT="$work/psref_$optimizer" "$TRAIN_PARAMS" "${common[@]}" --optimizer=$optimizer \
    --batch_size=$((2 * B)) >/dev/null 2>&1
  train "ps_$optimizer" "${common_ps[@]}" --optimizer=$optimizer || continue
  matches "ps_$optimizer" "psref_$optimizer"
  # Per step: one reduce group into GPU 0, an update there, one broadcast group back.
  got=$(calls "$work/ps_$optimizer-stub.0" | grep -c "^reduce comm=C1:. count=$ARENA type=fp32 op=avg root=0")
  [ "$got" = $((2 * K)) ] || fail "ps $optimizer: $got reduce calls, want $((2 * K))"
  got=$(calls "$work/ps_$optimizer-stub.0" | grep -c "^broadcast comm=C1:. count=$ARENA type=fp32 root=0")
  [ "$got" = $((2 * (K + 1))) ] || fail "ps $optimizer: $got broadcast calls, want $((2 * (K + 1)))"
done
grep -q "parameter server on the first replica's GPU" "$work/ps_momentum.log" \
  || fail "parameter_server did not say where its variables are"

echo "== faults in one process"
# fault NAME FAULT NEEDLE ARGS...: exit 1, the message, the communicators aborted.
fault() {
  local name=$1 what=$2 needle=$3 rc=0; shift 3
  CNNB_NCCL_STUB_FAULT=$what CNNB_NCCL_STUB_LOG="$work/$name-stub" timeout -s KILL 60 "$CNNBENCH" \
    "${common[@]}" --num_batches=20 "$@" >"$work/$name.log" 2>&1 || rc=$?
  [ $rc -eq 1 ] || { fail "$name: exit $rc, want 1"; tail -n 3 "$work/$name.log"; }
  grep -qF -- "$needle" "$work/$name.log" || { fail "$name: no '$needle'"; grep error "$work/$name.log"; }
  [ "$(grep -c '^comm_abort' "$work/$name-stub.0")" -ge 1 ] || fail "$name: no communicator aborted"
  ! grep -q "^comm_destroy\|^comm_finalize" "$work/$name-stub.0" || fail "$name: finalised after the fault"
  echo "ok: $name: $(grep -m1 -o 'NCCL: .*' "$work/$name.log" | cut -c1-150)"
}
fault hang hang:0:5 "NCCL: no progress within 2 s (the work of GPUs 0, 1 did not end)" \
  "${rep[@]}" --num_gpus=2 --all_reduce_spec=nccl --collective_timeout_s=2
fault remote error:0:5 "NCCL: stub: a remote peer failed (CNNB_NCCL_STUB_FAULT=error:0:5)" \
  "${rep[@]}" --num_gpus=2 --all_reduce_spec=nccl

echo "== refusals"
# refused NEEDLE ARGS...: exit 2, one error line holding NEEDLE, before any step.
refused() {
  local needle=$1 out rc=0; shift
  out=$(timeout 60 "$CNNBENCH" "${common[@]}" --batch_size=2 --num_batches=1 "$@" 2>&1) || rc=$?
  [ $rc -eq 2 ] || { fail "$*: exit $rc, want 2"; echo "$out" | tail -n 3; return; }
  [ "$(grep -c "error:" <<<"$out")" -eq 1 ] || fail "$*: not one error line: $out"
  grep -qF -- "$needle" <<<"$out" || { fail "$*: no '$needle'"; grep error <<<"$out"; }
  ! grep -q "^Step" <<<"$out" || fail "$*: steps ran before the refusal"
  ! grep -qi "without NCCL\|has no NCCL" <<<"$out" || [[ $needle == *"has no NCCL"* ]] \
    || fail "$*: blamed a build without NCCL: $out"
}
CNNB_NCCL_STUB_UNAVAILABLE="no CUDA device visible (CUDA_VISIBLE_DEVICES=)" refused \
  "--all_reduce_spec=nccl: NCCL cannot run on this machine: no CUDA device visible" \
  --device=fixture_gpu --num_gpus=2 --variable_update=replicated --all_reduce_spec=nccl
CNNB_NCCL_LIBRARY="$work/none.so" refused "--all_reduce_spec=nccl: CNNB_NCCL_LIBRARY=$work/none.so cannot be read" \
  --device=fixture_gpu --num_gpus=2 --variable_update=replicated --all_reduce_spec=nccl
# horovod is built with MPI only.
have_horovod=false
[ -e "$CNNB_PLUGIN_DIR/libcnnb_strategy_horovod.so" ] && have_horovod=true
if $have_horovod; then
  refused "--horovod_gpu_operations=nccl: NCCL reduces on GPUs; device cpu has none" \
    --variable_update=horovod --horovod_gpu_operations=nccl
  refused "--horovod_gpu_operations=sometimes: must be auto, nccl or mpi" \
    --variable_update=horovod --horovod_gpu_operations=sometimes
  # tf's --horovod_device names the same choice: gpu is nccl, cpu is mpi.
  refused "--horovod_gpu_operations=nccl: NCCL reduces on GPUs; device cpu has none" \
    --variable_update=horovod --horovod_device=gpu
  refused "--horovod_device=cpu means --horovod_gpu_operations=mpi, and --horovod_gpu_operations=nccl was given" \
    --variable_update=horovod --horovod_device=cpu --horovod_gpu_operations=nccl
  refused "--horovod_device=tpu: must be cpu, gpu or empty" --variable_update=horovod --horovod_device=tpu
fi
# The real implementation (it links NCCL and the CUDA runtime) on this machine.
impl="$CNNB_PLUGIN_DIR/nccl/libcnnb_nccl_impl.so"
fake=false
[ "${CNNB_CUDA_FAKE:-0}" = 1 ] && fake=true
if $fake; then
  # On the fake's GPUs, with a device that is no CUDA device: the fake's NCCL must stop it.
  rc=0
  out=$(CNNB_NCCL_LIBRARY='' timeout 60 "$CNNBENCH" "${common[@]}" --batch_size=2 --num_batches=1 \
          --device=fixture_gpu --num_gpus=2 --variable_update=replicated --all_reduce_spec=nccl 2>&1) || rc=$?
  [ $rc -eq 134 ] || { fail "the fake NCCL given fixture_gpu's streams: exit $rc, want 134 (its abort)"; tail -n 3 <<<"$out"; }
  grep -q "^fake CUDA: ncclAllReduce: " <<<"$out" \
    || { fail "the fake's abort does not name ncclAllReduce:"; grep -m2 "fake CUDA" <<<"$out"; }
  echo "ok: the fake refuses fixture_gpu: $(grep -m1 -o 'fake CUDA: .*' <<<"$out" | cut -c1-120)"
elif [ ! -e "$impl" ]; then
  echo "(the real NCCL implementation is not built here: its refusal is not checked)"
  CNNB_NCCL_LIBRARY= refused "--all_reduce_spec=nccl: this build has no NCCL" \
    --device=fixture_gpu --num_gpus=2 --variable_update=replicated --all_reduce_spec=nccl
elif out=$(CNNB_NCCL_LIBRARY= timeout 60 "$CNNBENCH" "${common[@]}" --batch_size=2 --num_batches=1 \
             --device=fixture_gpu --variable_update=replicated --all_reduce_spec=nccl 2>&1); then
  echo "(a GPU is usable here: the real implementation ran; its refusal is not checked)"
else
  want="--all_reduce_spec=nccl: NCCL cannot run on this machine: "
  ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 ' || want+="no NVIDIA driver: libcuda.so.1 cannot be loaded"
  CNNB_NCCL_LIBRARY= refused "$want" --device=fixture_gpu --num_gpus=2 --variable_update=replicated \
    --all_reduce_spec=nccl
  echo "ok: the real implementation refuses: $(grep -m1 -o 'NCCL cannot run.*' <<<"$out" | cut -c1-120)"
fi

echo "== what links what"
# The strategy plugins link no NCCL or CUDA library (they load the implementation on
# demand), cnnbench links neither MPI nor NCCL, and the implementation is what links NCCL.
if command -v readelf >/dev/null 2>&1; then
  for so in "$CNNB_PLUGIN_DIR"/libcnnb_strategy_*.so "$CNNBENCH"; do
    ! readelf -d "$so" | grep -E 'NEEDED.*(libnccl|libcudart|libcuda\.)' \
      || fail "$so links NCCL or CUDA"
  done
  ! readelf -d "$CNNBENCH" | grep -E 'NEEDED.*libmpi' || fail "cnnbench links MPI"
  if $fake; then # the fake's NCCL, never NVIDIA's
    readelf -d "$impl" | grep -q 'NEEDED.*libcnnb_fake_cuda\.so' || fail "$impl does not link the fake"
    ! readelf -d "$impl" | grep -E 'NEEDED.*(libnccl|libcudart|libcuda\.)' || fail "$impl links NVIDIA's"
  else
    [ ! -e "$impl" ] || readelf -d "$impl" | grep -q 'NEEDED.*libnccl\.so' \
      || fail "$impl does not link NCCL"
  fi
else
  echo "(readelf not found: the links are not checked)"
fi

echo "== across processes (mpirun -np 2, the ranks coupled through the stub's directory)"
if ! command -v mpirun >/dev/null 2>&1 || ! $have_horovod; then
  echo "(skipped: mpirun not found, or a build without MPI: no horovod plugin)"
else
  [ "${CNNB_SANITIZE:-0}" != 1 ] || export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
  mkdir -p "$work/progress"
  export CNNB_NCCL_STUB_DIR="$work/progress"
  # rank0_log NAME: NAME.log keeps rank 0's lines only (buckets reads it).
  rank0_log() { sed -n 's/^\[rank 0\] //p' "$work/$1.log" >"$work/$1.log0" && mv "$work/$1.log0" "$work/$1.log"; }
  # mpi_train NAME ARGS...: 2 ranks of train_params.
  mpi_train() {
    local name=$1; shift
    CNNB_NCCL_STUB_LOG="$work/$name-stub" CNNB_PARAMS_OUT="$work/$name" mpi_run_bounded 120 2 \
      "$TRAIN_PARAMS" "${common[@]}" "$@" >"$work/$name.log" 2>&1 \
      || { fail "mpirun $name exited $?:"; tail -n 8 "$work/$name.log"; return 1; }
  }
  if mpi_train np2_nccl "${rep[@]}" --num_gpus=2 --all_reduce_spec=nccl; then
    echo "-- replicated nccl: one communicator of 4 GPUs over 2 ranks"
    rank0_log np2_nccl
    RANK=0 WORLD=2 sequence np2_nccl 2 "" world "$work/np2_nccl-stub.0"
    RANK=1 WORLD=2 sequence np2_nccl 2 "" world "$work/np2_nccl-stub.1"
    # Rank 0 made the id, rank 1 got it over MPI: one id in both logs.
    ids=$(cat "$work/np2_nccl-stub.0" "$work/np2_nccl-stub.1" | grep -o 'comm=[0-9a-f]*' | sort -u | wc -l)
    [ "$ids" = 1 ] || fail "the ranks' communicators have $ids unique ids, want 1"
    ! grep -q get_unique_id "$work/np2_nccl-stub.1" || fail "rank 1 made a unique id of its own"
  fi
  CNNB_PARAMS_OUT="$work/ref4" "$TRAIN_PARAMS" "${common[@]}" --batch_size=$((4 * B)) >/dev/null 2>&1
  if mpi_train np2_xring "${rep[@]}" --num_gpus=2 --all_reduce_spec=nccl/xring; then
    echo "-- replicated nccl/xring: NCCL in each process, MPI across, NCCL back"
    rank0_log np2_xring
    RANK=0 WORLD=2 sequence np2_xring 2 "" mpi "$work/np2_xring-stub.0"
    matches np2_xring ref4
  fi
  hvd=(--batch_size=$B --device=fixture_gpu --variable_update=horovod --gradient_bucket_mb=0.5
       --horovod_fusion_threshold=1500000)
  # The horovod sequences: every rank's the same but for its rank and stream; per step
  # the groups' counts add up to the whole arena, none above the fusion threshold.
  horovod_calls() { # NAME RANK
    calls "$work/$1-stub.$2" | grep -v '^event_create\|^get_unique_id' | sed "s/:$2\b/:R/g; s/stream=$2\b/stream=R/g; s/ordinal=$2\b/ordinal=R/g"
  }
  for mode in flat hier compact; do
    extra=()
    [ $mode = hier ] && extra=(--horovod_hierarchical_allreduce)
    [ $mode = compact ] && extra=(--compact_gradient_transfer)
    mpi_train "hvd_$mode" "${hvd[@]}" "${extra[@]}" || continue
    grep -q "on the GPU by NCCL" "$work/hvd_$mode.log" || fail "horovod $mode did not take NCCL"
    if [ $mode != hier ]; then
      diff <(horovod_calls "hvd_$mode" 0) <(horovod_calls "hvd_$mode" 1) >/dev/null \
        || fail "horovod $mode: the ranks' NCCL calls differ"
      type=fp32; [ $mode = compact ] && type=bf16
      # (lenet's 4 buckets, of which the 2 small ones fuse: 3 all-reduces a step)
      calls "$work/hvd_$mode-stub.0" | awk -v type=$type -v steps=$K -v arena=$ARENA '
        /^all_reduce/ { split($3, c, "="); total += c[2]; n++
                        if ($4 != "type=" type || $5 != "op=avg" || $7 != "in_place") bad++ }
        END { if (total != arena * steps || bad || n != 3 * steps) {
                print "total " total " in " n " calls, " bad " bad"; exit 1 } }' \
        || fail "horovod $mode: the all-reduces do not cover the arena each step in 3 fused groups"
    else
      # Node (C1): a premultiplied reduce into rank 0 and a broadcast; leaders (C2): rank 0.
      calls "$work/hvd_hier-stub.0" | grep -q "^premul_sum comm=C1:0 type=fp32 scale=0.5" \
        || fail "hierarchical: no premultiplied sum of 1/2"
      r0=$(calls "$work/hvd_hier-stub.0" | grep -c "^all_reduce comm=C2:0 .*op=sum" || true)
      r1=$(calls "$work/hvd_hier-stub.1" | grep -c "^all_reduce" || true)
      red=$(calls "$work/hvd_hier-stub.1" | grep -c "^reduce comm=C1:1 .*op=premul.* root=0" || true)
      [ "$r0" -ge "$K" ] && [ "$r1" = 0 ] && [ "$red" -ge "$K" ] \
        || fail "hierarchical: leaders' all-reduces $r0 (rank 0), $r1 (rank 1), node reduces $red"
    fi
    [ $mode != compact ] || calls "$work/hvd_compact-stub.0" | grep -q "^convert stream=0 from=fp32 to=bf16" \
      || fail "horovod compact: no bf16 copies"
  done
  CNNB_PARAMS_OUT="$work/ref2" "$TRAIN_PARAMS" "${common[@]}" --batch_size=$((2 * B)) >/dev/null 2>&1
  if mpi_train hvd_mpi "${hvd[@]}" --horovod_gpu_operations=mpi; then
    [ ! -s "$work/hvd_mpi-stub.0" ] || fail "--horovod_gpu_operations=mpi called NCCL"
    grep -q "staged through host memory (--horovod_gpu_operations=mpi)" "$work/hvd_mpi.log" \
      || fail "horovod mpi did not say it stages"
    "$PARAMS_COMPARE" 1e-6 "$work/ref2.0.0" "$work/hvd_mpi.0.0" "$work/hvd_mpi.1.0" >/dev/null \
      || fail "horovod through host memory on fixture_gpu differs from 1 x 2b"
  fi
  # Two ranks on one GPU: auto takes the host path, saying why (NCCL would refuse them).
  out=$(FIXTURE_GPU_COUNT=1 mpi_run_bounded 60 2 "$CNNBENCH" "${common[@]}" --batch_size=2 \
        --num_batches=1 --device=fixture_gpu --variable_update=horovod 2>&1) \
    || fail "horovod auto on a shared GPU: exit $?"
  grep -q "staged through host memory (ranks 0 and 1 share GPU 0 (NCCL needs a GPU of its own per rank))" <<<"$out" \
    || { fail "horovod auto on a shared GPU did not take the host path saying why"; grep horovod: <<<"$out"; }
  out=$(mpi_run_bounded 60 2 "$CNNBENCH" "${common[@]}" --batch_size=2 --num_batches=1 --device=fixture_gpu \
        --variable_update=parameter_server --local_parameter_device=gpu 2>&1) && rc=0 || rc=$?
  [ $rc -ne 0 ] && grep -qF -- "--local_parameter_device=gpu keeps the variables on one process's GPU; across the 2 ranks" <<<"$out" \
    || { fail "ps gpu under mpirun: exit $rc"; grep error <<<"$out" | head -n 2; }

  echo "-- a rank that stops mid-step: rank 0 names it, aborts, and the job ends"
  rm -f "$work"/progress/*
  start=$SECONDS rc=0
  CNNB_NCCL_STUB_FAULT=stop:1:4 CNNB_NCCL_STUB_LOG="$work/stop-stub" mpi_run_bounded 120 2 "$CNNBENCH" \
    "${common[@]}" --num_batches=50 "${rep[@]}" --num_gpus=2 --all_reduce_spec=nccl \
    --collective_timeout_s=3 >"$work/stop.log" 2>&1 || rc=$?
  took=$((SECONDS - start))
  [ $rc -ne 0 ] || fail "the stopped rank's job exited 0"
  # Bound: the NCCL wait (3) and the barrier's (3) with its probe window (3), plus start-up.
  [ $took -le 40 ] || fail "the job took $took s to end"
  grep -q "rank 1 stopped answering: .*NCCL: no progress within 3 s" "$work/stop.log" \
    || { fail "rank 0 did not name rank 1 after NCCL stalled"; grep error "$work/stop.log"; }
  [ "$(grep -c '^comm_abort' "$work/stop-stub.0")" = 2 ] || fail "rank 0 did not abort its 2 communicators"
  for _ in $(seq 20); do [ -z "$(mpi_pids)" ] && break; sleep 0.5; done
  [ -z "$(mpi_pids)" ] || fail "processes left behind: $(mpi_pids)"
  echo "ok: exit $rc after $took s: $(grep -o 'rank 1 stopped answering.*' "$work/stop.log" | cut -c1-120)"
fi

[ $failures -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "PASS"
