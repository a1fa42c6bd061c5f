#!/usr/bin/env bash
# gpu_check.sh — issue 9's GPU check: one command, run from the repository root on a lent
# GPU machine (one H200, 16 cores, no network), that fits a short lease. It
#   (a) records the facts: GPU, driver, nvcc, cuDNN, PyTorch, cmake, gcc, the commit;
#   (b) configures and builds the tree there (the cuda plugin is built where it runs; the
#       Check, jansson, pkg-config and oneDNN (the cpu device, which cli_gpu_matches_cpu
#       compares with) the image lacks come from .gpu-deps/, made here by
#       scripts/gpu-deps.sh and carried, with libjpeg-turbo);
#   (c) runs the `gpu` tests (ctest -L gpu), time-capped;
#   (d) benchmarks cnnbench (--device=cuda) and PyTorch (bench/pytorch_gpu_train.py) side
#       by side, each run under its own timeout, the decisive rows first;
#   (e) writes one Markdown table, rewritten after every row, to $OUT/gpu_check.md (and
#       prints it at the end), with GPU memory beside each figure.
# A row whose cnnbench run fails shows that run's first error line, never a number; when
# the build has no usable cuda device, every cnnbench cell says why and PyTorch still runs.
#
# Time (the whole check must end inside 8 minutes, build included): a global budget
# (--budget, 450 s) from the script's start; a row is run only when enough of it is left,
# and each run's timeout is cut to what is left, so a hang costs one row, not the lease.
# Estimated on the H200 from issue 9's measured PyTorch figures (per step = batch / img/s;
# a run = 10 warm-up + 30 timed steps, plus start-up: ~5 s for python + torch import and
# cudnn.benchmark's search, cnnbench's plugin load and algorithm choice assumed similar):
#   resnet50 fp16 256/5807 = 44 ms -> 1.8 s   bf16 55 ms -> 2.2 s   fp32 81 ms -> 3.2 s
#   resnet50 inference fp16 256/16717 = 15 ms -> 0.6 s
#   resnet152 fp16 98 ms -> 3.9 s, fp32 ~190 ms -> 7.6 s
#   vgg16 fp16 69 ms -> 2.8 s, fp32 ~170 ms -> 6.8 s
#   inception3 fp16 96 ms -> 3.8 s, fp32 ~190 ms -> 7.6 s
#   alexnet (batch 512) fp16 12 ms -> 0.5 s, fp32 ~25 ms -> 1.0 s
#   = ~41 s of steps per framework, ~80 s for both, + 26 runs x ~6 s of start-up ~ 160 s;
#   the two NCCL rows (resnet50 fp16 through replicated nccl / parameter_server on the GPU;
#   PyTorch's figure reused): 2 x (1.8 s + ~8 s start-up, NCCL's set-up included) ~ 20 s;
#   configure ~20 s + build ~90 s (16 cores; nvcc for sm_90 only); gpu tests <= 150 s;
#   torch.compile of resnet50 (last, only if >= 150 s are left) ~60-120 s.
#   Total ~7 minutes; the budget drops the last rows rather than overrun.
#
# Usage (from the repository root; bench/README.md, "GPU check", has the `run` call):
#   COMMIT=<sha> bench/gpu_check.sh [--dry-run] [--smoke] [--budget=S] [--rows=ID,ID|all]
#       [--steps=N] [--warmup=N] [--tests-timeout=S] [--no-tests] [--no-build]
#       [--no-compile] [--build-dir=DIR] [--build-targets="T1 T2"]
# Env: OUT (results folder; default BUILD/gpu-check-out), COMMIT (the commit, when .git
# did not travel), PYTHON (default python3), CNNB_FLAGS (extra cnnbench flags, e.g.
# "--nocudnn_autotune"), GPU_DEPS (default .gpu-deps).
# --dry-run prints every command it would run (configure, build, tests, each benchmark)
# and the table with placeholders; it runs nothing but the read-only facts.
# --smoke tests the script itself on a machine without a GPU (CI runs it): the same code
# paths as the full run, with cnnbench --device=cuda on a test-only tree built with
# -DCNNB_CUDA_FAKE=ON (the cuda device on the checking CPU fake of CUDA, cuDNN and NCCL).
# It builds nothing (it implies --no-build; --build-dir, default build-fake, must be such
# a tree: its CMakeCache.txt says CNNB_CUDA_FAKE:BOOL=ON, else it refuses, naming the
# commands that make one). By default it runs the rows whose parsing differs (--rows
# overrides): resnet50-fp16 (train), -infer, -graphs (--cuda_graphs: "N recording(s)"
# must be >= 1), -nccl and -psgpu (their logs must name NCCL), and the compile row's skip,
# at batch 2, 1 warm-up + 2 steps (--cuda_graphs records step 3), ResNets at
# --image_size=64 (at 32 a batch of 2 leaves 1x1 maps whose fp16 gradients overflow the
# static loss scale), the autotune cache in the logs folder, each run at most 240 s.
# alexnet, vgg16 and inception3 have fixed sizes (227 and 224 by their dense layers, 299
# by an 8x8 pool): on the fake ~8, ~40 and ~18 s a step, so only by --rows, with a larger
# --budget. The tests: four quick ones of `ctest -L cuda_fake` (-R: unit_fake_cudnn,
# unit_nccl_impl, unit_device_ops_cuda, cli_gpu_fp16_overflow; CI's fake stage runs them
# all), at most 60 s. PyTorch runs on the CPU (fp16 as bf16, OMP_NUM_THREADS=1) when
# $PYTHON imports torch and torchvision; else its cells say so, which the smoke accepts.
# The GPU memory cells are n/a (no GPU memory to sample). Unlike the full run, it exits 1,
# naming each row or check, when a cnnbench row has no figure, a line or cell the full run
# parses is missing (the graphs count with N >= 1, the NCCL rows' NCCL, a memory cell, the
# tests' summary), a test fails, or torch imports and a PyTorch row has no figure. ~65 s
# of CPU, 75 s on a busy 2-core machine, ~20 s more with torch; its numbers mean nothing.
# --smoke's defaults: --build-dir=build-fake --budget=300 --steps=2 --warmup=1
# --tests-timeout=60.
set -uo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO" || exit 2

# ---------------------------------------------------------------- options
DRY_RUN=0
BUDGET_S=450
STEPS=30
WARMUP=10
TESTS_TIMEOUT_S=150
RUN_TESTS=1
RUN_BUILD=1
RUN_COMPILE=1
ROWS_WANTED=all
BUILD=build-gpu
BUILD_TARGETS=""
SMOKE=0
# --smoke's defaults first, so that explicit options after or before it still win.
for arg in "$@"; do
  if [ "$arg" = --smoke ]; then
    SMOKE=1
    BUILD=build-fake
    BUDGET_S=300
    STEPS=2
    WARMUP=1
    TESTS_TIMEOUT_S=60
    RUN_COMPILE=0
    ROWS_WANTED=resnet50-fp16,resnet50-fp16-infer,resnet50-fp16-graphs,resnet50-fp16-nccl,resnet50-fp16-psgpu,resnet50-fp16-compile
  fi
done
for arg in "$@"; do
  case "$arg" in
    --dry-run) DRY_RUN=1 ;;
    --smoke) SMOKE=1 ;;
    --budget=*) BUDGET_S=${arg#*=} ;;
    --steps=*) STEPS=${arg#*=} ;;
    --warmup=*) WARMUP=${arg#*=} ;;
    --tests-timeout=*) TESTS_TIMEOUT_S=${arg#*=} ;;
    --no-tests) RUN_TESTS=0 ;;
    --no-build) RUN_BUILD=0 ;;
    --no-compile) RUN_COMPILE=0 ;;
    --rows=*) ROWS_WANTED=${arg#*=} ;;
    --build-dir=*) BUILD=${arg#*=} ;;
    --build-targets=*) BUILD_TARGETS=${arg#*=} ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_check.sh: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done
for v in BUDGET_S STEPS WARMUP TESTS_TIMEOUT_S; do
  [[ ${!v} =~ ^[0-9]+$ ]] || { echo "gpu_check.sh: $v must be a whole number" >&2; exit 2; }
done
# The tests: the GPU's label; the smoke's is the fake tree's, four quick ones of it (CI's
# fake stage runs them all; the smoke exercises the running and the parsing).
TEST_ARGS=(-L gpu)
TEST_JOBS=4
if [ "$SMOKE" = 1 ]; then
  RUN_BUILD=0  # never configure a fake tree with the GPU's arguments
  TEST_ARGS=(-L cuda_fake -R '^(unit_fake_cudnn|unit_nccl_impl|unit_device_ops_cuda|cli_gpu_fp16_overflow)$')
  TEST_JOBS=2
  # A tree built with -DCNNB_CUDA_FAKE=ON (checked before anything is written into it).
  fake_why=""
  if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    fake_why="it has no CMakeCache.txt"
  elif ! grep -qiE '^CNNB_CUDA_FAKE:BOOL=(ON|1|TRUE|YES|Y)$' "$BUILD/CMakeCache.txt"; then
    fake_why="its CMakeCache.txt has $(grep -m1 '^CNNB_CUDA_FAKE:' "$BUILD/CMakeCache.txt" || echo 'no CNNB_CUDA_FAKE'), not CNNB_CUDA_FAKE:BOOL=ON"
  elif [ ! -x "$BUILD/bin/cnnbench" ]; then
    fake_why="it is configured with CNNB_CUDA_FAKE=ON but not built (no bin/cnnbench)"
  fi
  if [ -n "$fake_why" ]; then
    echo "gpu_check.sh: --smoke runs cnnbench --device=cuda on the CPU fake of CUDA and needs a" \
         "tree built with -DCNNB_CUDA_FAKE=ON; --build-dir $BUILD is not one: $fake_why. Make" \
         "one, then run the smoke on it:" >&2
    echo "  cmake -S . -B build-fake -DCNNB_CUDA_FAKE=ON && cmake --build build-fake -j\"\$(nproc)\"" >&2
    echo "  bash bench/gpu_check.sh --smoke --build-dir=build-fake" >&2
    exit 2
  fi
fi

PYTHON=${PYTHON:-python3}
GPU_DEPS=${GPU_DEPS:-.gpu-deps}
OUT=${OUT:-$BUILD/gpu-check-out}
mkdir -p "$OUT" "$BUILD" || exit 2
OUT=$(cd "$OUT" && pwd)
BUILD=$(cd "$BUILD" && pwd)
LOGS="$BUILD/gpu-check-logs"   # every run's log; $OUT gets them as one logs.tar.gz ($OUT
rm -rf "$LOGS"                 # brings back at most 8 files)
mkdir -p "$LOGS"
REPORT="$OUT/gpu_check.md"
START=$(date +%s)
DEADLINE=$((START + BUDGET_S))
# Everything the script prints also lands in $OUT/gpu_check.log (it comes back even when the
# run tool cuts the command off).
exec > >(tee "$OUT/gpu_check.log") 2>&1
TEE_PID=$!

say() { echo "gpu_check: $*"; }
elapsed() { echo $(( $(date +%s) - START )); }
left() { echo $(( DEADLINE - $(date +%s) )); }
# Prints a command as one shell-quoted line.
show() { local q; printf -v q '%q ' "$@"; echo "+ ${q% }"; }
# The first line of a log that names an error, else its last non-empty line; shortened
# and made safe for a Markdown table cell.
first_error() {
  local line
  if grep -q '^Traceback' "$1" 2>/dev/null; then  # Python: the exception is the last line
    line=$(grep -v '^[[:space:]]*$' "$1" | tail -n1)
  else  # (not the "+ command" line the log starts with)
    line=$(grep -v '^+ ' "$1" 2>/dev/null |
           grep -m1 -iE 'error|fail|fatal|abort|cannot|unsupported|out of memory|Killed')
  fi
  [ -n "$line" ] || line=$(grep -v -e '^[[:space:]]*$' -e '^+ ' "$1" 2>/dev/null | tail -n1)
  line=${line//|/\\|}
  line=${line//$'\t'/ }
  [ ${#line} -gt 160 ] && line="${line:0:157}..."
  echo "${line:-no output}"
}

# ---------------------------------------------------------------- (a) facts
# CUDA's compiler is not always on PATH (the image puts it under /usr/local/cuda).
if ! command -v nvcc >/dev/null 2>&1; then
  for d in /usr/local/cuda/bin /usr/local/cuda-13.0/bin; do
    [ -x "$d/nvcc" ] && { export PATH="$d:$PATH"; break; }
  done
fi
if [ -n "${COMMIT:-}" ]; then
  commit="$COMMIT (given)"
elif commit=$(git rev-parse HEAD 2>/dev/null); then
  dirty=$(git status --porcelain 2>/dev/null | wc -l)
  [ "$dirty" = 0 ] || commit="$commit + $dirty uncommitted/untracked files"
else
  commit="unknown (no .git here: pass COMMIT=<sha>)"
fi
cudnn_version() {
  local h
  for h in /usr/include/x86_64-linux-gnu/cudnn_version*.h /usr/include/cudnn_version*.h \
           /usr/local/cuda/include/cudnn_version.h "${CNNB_CUDNN_DIR:-/nonexistent}/cudnn_version.h"; do
    [ -f "$h" ] || continue
    awk '/#define CUDNN_MAJOR/ {M=$3} /#define CUDNN_MINOR/ {m=$3} /#define CUDNN_PATCHLEVEL/ {p=$3}
         END {if (M != "") printf "%s.%s.%s", M, m, p}' "$h"
    echo " ($h)"
    return
  done
  echo "not found"
}
torch_facts=$(timeout 60 "$PYTHON" -c 'import torch, torchvision; print(torch.__version__, "/ torchvision", torchvision.__version__, "/ cuda", torch.version.cuda, "/ cudnn", torch.backends.cudnn.version())' 2>/dev/null)
TORCH_OK=$?
gpu_facts=$(timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit,clocks.max.sm \
              --format=csv,noheader 2>/dev/null | head -n1)
FACTS=(
  "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  "commit: $commit"
  "GPU (name, driver, memory, power limit, max SM clock): ${gpu_facts:-nvidia-smi not available}"
  "CUDA compiler: $(nvcc --version 2>/dev/null | grep -m1 -o 'release [^,]*, V[0-9.]*' || echo 'nvcc not found')"
  "cuDNN header: $(cudnn_version)"
  "PyTorch: $([ "$TORCH_OK" = 0 ] && echo "$torch_facts" || echo "not importable by $PYTHON")"
  # shellcheck source=/dev/null
  "cmake: $(cmake --version 2>/dev/null | head -n1); C compiler: $(cc --version 2>/dev/null | head -n1); $(nproc) cores; $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
)
printf '%s\n' "${FACTS[@]}"

# ---------------------------------------------------------------- state for the report
BUILD_STATE="not run"
COMPONENTS=""
TESTS_STATE="not run"
CNNB_UNAVAILABLE=""   # why cnnbench cannot run on cuda here, when it cannot
declare -A RES        # RES[row,field]
declare -A TORCH_CACHE
CNNB_TIMEOUTS=0       # after two cnnbench runs time out, the rest are not started
SMOKE_FAILS=()        # --smoke: "what: why" for each check that failed
SMOKE_VERDICT=""
smoke_fail() { SMOKE_FAILS+=("$1"); say "SMOKE CHECK FAILED: $1"; }

# ---------------------------------------------------------------- rows
# id | cnnbench model | PyTorch model | precision | batch | mode (train/infer/compile/graphs:
# training, cnnbench with --cuda_graphs, PyTorch eager as in train; nccl / psgpu: training,
# cnnbench through replicated --all_reduce_spec=nccl / parameter_server
# --local_parameter_device=gpu on the one GPU, PyTorch eager as in train) |
# estimated ms per step on an H200 (for the timeout) | target
ROWS=(
  "resnet50-fp16|resnet50|resnet50|fp16|256|train|44|cnnbench >= 7,000 and >= PyTorch (issue: PyTorch 5,807)"
  "resnet50-fp16-infer|resnet50|resnet50|fp16|256|infer|15|>= PyTorch (issue: 16,717)"
  "resnet50-fp16-graphs|resnet50|resnet50|fp16|256|graphs|44|--cuda_graphs: >= the resnet50-fp16 row"
  "resnet50-bf16|resnet50|resnet50|bf16|256|train|55|>= PyTorch (issue: 4,685)"
  "resnet50-fp32|resnet50|resnet50|fp32|256|train|81|>= PyTorch (issue: 3,167, TF32)"
  "resnet152-fp16|resnet152|resnet152|fp16|256|train|98|>= PyTorch (issue: 2,611)"
  "vgg16-fp16|vgg16|vgg16|fp16|256|train|69|>= PyTorch (issue: 3,685)"
  "inception3-fp16|inception3|inception3|fp16|256|train|96|>= PyTorch (issue: 2,676)"
  "alexnet-fp16|alexnet|alexnet|fp16|512|train|12|>= PyTorch (issue: 42,642)"
  "resnet50-fp16-nccl|resnet50|resnet50|fp16|256|nccl|45|replicated nccl, 1 GPU: within 3% of the resnet50-fp16 row"
  "resnet50-fp16-psgpu|resnet50|resnet50|fp16|256|psgpu|45|parameter_server on the GPU: within 3% of resnet50-fp16"
  "resnet152-fp32|resnet152|resnet152|fp32|256|train|190|>= PyTorch"
  "vgg16-fp32|vgg16|vgg16|fp32|256|train|170|>= PyTorch"
  "inception3-fp32|inception3|inception3|fp32|256|train|190|>= PyTorch"
  "alexnet-fp32|alexnet|alexnet|fp32|512|train|25|>= PyTorch"
  "resnet50_v1.5-fp16|resnet50_v1.5|resnet50|fp16|256|train|47|same network as torchvision's resnet50 (v1.5)"
  "resnet50-fp16-compile|-|resnet50|fp16|256|compile|44|cnnbench >= 7,000 > compiled PyTorch (issue: 6,656)"
)
row_wanted() {
  [ "$ROWS_WANTED" = all ] && return 0
  [[ ",$ROWS_WANTED," == *",$1,"* ]]
}

# ---------------------------------------------------------------- the report
write_report() {
  local r id cm tm prec batch mode est target cn pt ratio mem_c mem_p model
  {
    echo "# cnnbench GPU check (bench/gpu_check.sh)"
    echo
    printf -- '- %s\n' "${FACTS[@]}"
    [ "$SMOKE" = 1 ] && echo "- SMOKE TEST (--smoke): cnnbench --device=cuda on the CPU fake of CUDA ($BUILD, CNNB_CUDA_FAKE=ON), PyTorch on the CPU (its fp16 as bf16), batch 2, ResNets at 64x64; the numbers mean nothing"
    echo "- build: $BUILD_STATE"
    [ -n "$COMPONENTS" ] && echo "- components: $COMPONENTS"
    echo "- gpu tests (ctest ${TEST_ARGS[*]}): $TESTS_STATE"
    [ -n "$CNNB_UNAVAILABLE" ] && echo "- cnnbench --device=cuda not run: $CNNB_UNAVAILABLE"
    echo "- runs: $WARMUP warm-up + $STEPS timed steps each, synthetic data; elapsed $(elapsed) s of a $BUDGET_S s budget"
    [ -n "$SMOKE_VERDICT" ] && echo "- smoke: $SMOKE_VERDICT"
    echo
    echo "| model | precision | batch | mode | cnnbench img/s | PyTorch img/s | cnnbench / PyTorch | cnnbench GPU MiB | PyTorch GPU MiB | target |"
    echo "|---|---|---:|---|---:|---:|---:|---:|---:|---|"
    for r in "${ROWS[@]}"; do
      IFS='|' read -r id cm tm prec batch mode est target <<<"$r"
      row_wanted "$id" || continue
      cn=${RES[$id,cnnb]:-not run}
      pt=${RES[$id,torch]:-not run}
      ratio="-"
      if [[ $cn =~ ^[0-9.]+$ && $pt =~ ^[0-9.]+ ]]; then
        ratio=$(awk -v a="$cn" -v b="${pt%% *}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')
        cn="**$cn**"
      fi
      mem_c=${RES[$id,cnnb_mem]:--}
      mem_p=${RES[$id,torch_mem]:--}
      model=$cm
      [ "$cm" = - ] && model="$tm (PyTorch only)"
      [ "$SMOKE" = 1 ] && batch=2
      echo "| $model | $prec | $batch | $mode | $cn | $pt | $ratio | $mem_c | $mem_p | $target |"
    done
    echo
    echo "GPU MiB: cnnbench's is nvidia-smi's memory.used, sampled every 0.2 s during the run, less"
    echo "the idle value before it (CUDA context, cuDNN/cuBLAS workspaces and the arena"
    echo "together). PyTorch's is the same nvidia-smi figure / torch.cuda.max_memory_allocated."
    echo "cnnbench runs: \`build-gpu/bin/cnnbench --device=cuda --model=M --batch_size=B"
    echo "--num_batches=$STEPS --num_warmup_batches=$WARMUP --optimizer=momentum --precision=P"
    echo "--display_every=10 [--forward_only | --cuda_graphs | --variable_update=replicated"
    echo "--all_reduce_spec=nccl | --variable_update=parameter_server --local_parameter_device=gpu]"
    echo "${CNNB_FLAGS:-}\`; PyTorch runs: \`python3"
    echo "bench/pytorch_gpu_train.py --model=M --batch_size=B --num_batches=$STEPS"
    echo "--num_warmup_batches=$WARMUP --precision=P [--inference] [--compile]\`. cnnbench's resnet50 and"
    echo "resnet152 are v1 (tf_cnn_benchmarks'), torchvision's v1.5 (6% more FLOPs; the"
    echo "resnet50_v1.5 row compares the same network); cnnbench's alexnet is 227x227, torchvision's 224x224."
  } > "$REPORT.tmp" && mv "$REPORT.tmp" "$REPORT"
  # The logs, as one file (the run tool returns at most 8 files from $OUT).
  tar -czf "$OUT/logs.tar.gz.tmp" -C "$(dirname "$LOGS")" "$(basename "$LOGS")" 2>/dev/null &&
    mv "$OUT/logs.tar.gz.tmp" "$OUT/logs.tar.gz"
}

# ---------------------------------------------------------------- GPU memory sampling
SAMPLER_PID=""
MEM_BASE=0
mem_start() {  # $1: sample file
  SAMPLER_PID=""
  # The smoke's "GPU" is the CPU fake: nothing to sample (the cells say n/a).
  [ "$SMOKE" = 1 ] && return 0
  command -v nvidia-smi >/dev/null 2>&1 || return 0
  MEM_BASE=$(timeout 10 nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 2>/dev/null | head -n1)
  [[ $MEM_BASE =~ ^[0-9]+$ ]] || MEM_BASE=0
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 -lms 200 > "$1" 2>/dev/null &
  SAMPLER_PID=$!
}
mem_stop() {  # $1: sample file; prints the peak above idle in MiB, or "n/a"
  if [ -n "$SAMPLER_PID" ]; then
    kill "$SAMPLER_PID" 2>/dev/null
    wait "$SAMPLER_PID" 2>/dev/null
    SAMPLER_PID=""
  fi
  local peak
  peak=$(grep -E '^[0-9]+$' "$1" 2>/dev/null | sort -n | tail -n1)
  if [ -n "$peak" ]; then echo $((peak - MEM_BASE)); else echo "n/a"; fi
}

# Runs one benchmark command under a timeout cut to the budget. $1: log, $2: the row's
# timeout (s); the rest: the command. Sets RUN_RC (124: timed out; 125: not run, budget)
# and RUN_MEM.
run_bench() {
  local log=$1 limit=$2 remain
  shift 2
  remain=$(( $(left) - 10 ))
  [ "$remain" -lt "$limit" ] && limit=$remain
  show "$@" | tee "$log"
  RUN_MEM="-"
  if [ "$DRY_RUN" = 1 ]; then RUN_RC=0; return; fi
  if [ "$limit" -lt 20 ]; then
    echo "not run: the $BUDGET_S s budget is spent" | tee -a "$log"
    RUN_RC=125; return
  fi
  mem_start "$log.mem"
  timeout -k 5 "$limit" "$@" >> "$log" 2>&1
  RUN_RC=$?
  RUN_MEM=$(mem_stop "$log.mem")
  RUN_LIMIT=$limit
  [ "$RUN_RC" = 124 ] || [ "$RUN_RC" = 137 ] && echo "gpu_check: timed out after $limit s"
  tail -n 4 "$log"
}
images_per_sec() { grep -m1 -oE 'total images/sec: *[0-9.]+' "$1" | grep -oE '[0-9.]+$'; }
# What a failed run's cell says.
failure_cell() {  # $1 rc, $2 log
  case "$1" in
    124|137) echo "timed out after $RUN_LIMIT s; last line: $(grep -v '^[[:space:]]*$' "$2" | tail -n1 | cut -c1-120 | sed 's/|/\\|/g')" ;;
    125) echo "not run: budget spent" ;;
    *) echo "failed (exit $1): $(first_error "$2")" ;;
  esac
}

# ---------------------------------------------------------------- (b) configure + build
case "$GPU_DEPS" in /*) DEPS_ROOT="$GPU_DEPS/root" ;; *) DEPS_ROOT="$REPO/$GPU_DEPS/root" ;; esac
DEPS_LIB="$DEPS_ROOT/usr/lib/x86_64-linux-gnu"
ORIG_LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
# PyTorch runs with the machine's own library path, not the carried libraries.
if [ -n "$ORIG_LD_LIBRARY_PATH" ]; then PY_ENV=(env "LD_LIBRARY_PATH=$ORIG_LD_LIBRARY_PATH")
else PY_ENV=(env -u LD_LIBRARY_PATH); fi
# The smoke's PyTorch on the CPU: one thread (OpenMP threads that spin on a busy 2-core
# machine made a 0.2 s step take 13 s).
[ "$SMOKE" = 1 ] && PY_ENV+=(OMP_NUM_THREADS=1)
CMAKE_ARGS=(-S "$REPO" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release
            # gcc 13 there may warn where gcc 12 here does not: the check measures, CI lints.
            -DCNNB_WERROR=OFF
            # Only the H200's architecture: half the nvcc time of the default "80-real;90".
            -DCMAKE_CUDA_ARCHITECTURES=90)
if [ -x "$DEPS_ROOT/usr/bin/pkgconf" ]; then
  # The carried pkgconf on the carried .pc files alone (scripts/gpu-deps.sh made them
  # relocatable); its libraries and those the tests link come from the same folder.
  export PKG_CONFIG_LIBDIR="$DEPS_LIB/pkgconfig"
  unset PKG_CONFIG_PATH
  export LD_LIBRARY_PATH="$DEPS_LIB${ORIG_LD_LIBRARY_PATH:+:$ORIG_LD_LIBRARY_PATH}"
  CMAKE_ARGS+=(-DPKG_CONFIG_EXECUTABLE="$DEPS_ROOT/usr/bin/pkgconf"
              # oneDNN's CMake package and the OpenCL headers it asks for (the cpu device,
              # which cli_gpu_matches_cpu compares the cuda device with).
              -DCMAKE_PREFIX_PATH="$DEPS_ROOT/usr")
else
  say "warning: no $GPU_DEPS/root/usr/bin/pkgconf (run scripts/gpu-deps.sh here and carry $GPU_DEPS):" \
      "using the machine's own pkg-config, Check and jansson, if it has them"
fi
# A fresh build folder gets Ninja when the machine has it (faster, and -k 0 keeps going).
if [ ! -f "$BUILD/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then
  CMAKE_ARGS+=(-G Ninja)
fi

if [ "$RUN_BUILD" = 1 ]; then
  say "configure + build ($(elapsed) s)"
  show env "PKG_CONFIG_LIBDIR=${PKG_CONFIG_LIBDIR:-}" cmake "${CMAKE_ARGS[@]}"
  if [ "$DRY_RUN" = 1 ]; then
    # shellcheck disable=SC2086  # a list of target names, split on purpose
    show cmake --build "$BUILD" -j16 ${BUILD_TARGETS:+--target $BUILD_TARGETS} -- -k 0
    BUILD_STATE="dry run"
  else
    timeout -k 5 240 cmake "${CMAKE_ARGS[@]}" > "$LOGS/configure.log" 2>&1
    rc=$?
    COMPONENTS=$(sed -n 's/^-- cnnbench component \([A-Z]*\): \(.*\)$/\1 \2/p' "$LOGS/configure.log" |
                 paste -sd ';' - | sed 's/;/; /g')
    grep -E 'cnnbench component|cuda device' "$LOGS/configure.log"
    if [ "$rc" != 0 ]; then
      # CMake's message is on the lines after "CMake Error at FILE:LINE".
      BUILD_STATE="configure failed (exit $rc): $(grep -m1 -A3 'CMake Error' "$LOGS/configure.log" |
        grep -v '^[[:space:]]*$' | tr -s ' \n' ' ' | sed 's/|/\\|/g' | cut -c1-300)"
      tail -n 30 "$LOGS/configure.log"
    else
      # Keep going past a failing file, so what does build (PyTorch needs none of it; the
      # rest of cnnbench may) is there; the first errors are reported.
      if grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja' "$BUILD/CMakeCache.txt"; then keep=(-k 0); else keep=(-k); fi
      targets=()
      # shellcheck disable=SC2206  # a list of target names, split on purpose
      [ -n "$BUILD_TARGETS" ] && targets=(--target $BUILD_TARGETS)
      budget_build=$(( $(left) - 120 ))
      [ "$budget_build" -gt 360 ] && budget_build=360
      [ "$budget_build" -lt 60 ] && budget_build=60
      show cmake --build "$BUILD" -j16 "${targets[@]}" -- "${keep[@]}"
      t0=$(date +%s)
      timeout -k 5 "$budget_build" cmake --build "$BUILD" -j16 "${targets[@]}" -- "${keep[@]}" \
        > "$OUT/build.log" 2>&1
      rc=$?
      t=$(( $(date +%s) - t0 ))
      warnings=$(grep -c 'warning:' "$OUT/build.log")
      if [ "$rc" = 0 ]; then
        BUILD_STATE="ok in $t s ($warnings compiler warnings; CNNB_WERROR=OFF)"
      else
        # The compiler's first "error:" line (gcc, nvcc), else ninja's first FAILED: line.
        err=$(grep -m1 -E '(^|[ :])(fatal )?error( [A-Za-z0-9#]+)? ?:' "$OUT/build.log")
        [ -n "$err" ] || err=$(grep -m1 -E '^FAILED:|\*\*\*' "$OUT/build.log")
        err=${err:-see build.log}
        err=${err//$REPO\//}
        err=${err//|/\\|}
        BUILD_STATE="FAILED (exit $rc after $t s): ${err:0:240}"
        grep -m10 -B2 -A3 -E '(^|[ :])(fatal )?error( [A-Za-z0-9#]+)? ?:|^FAILED:' "$OUT/build.log"
      fi
    fi
  fi
  say "build: $BUILD_STATE"
else
  BUILD_STATE="skipped (--no-build): using $BUILD as it is"
fi

CNNBENCH="$BUILD/bin/cnnbench"
CUDA_PLUGIN="$BUILD/lib/cnnbench/plugins/libcnnb_device_cuda.so"
CUDA_IMPL="$BUILD/lib/cnnbench/plugins/cuda/libcnnb_cuda_impl.so"
if [ "$DRY_RUN" = 0 ]; then
  if [ ! -x "$CNNBENCH" ]; then
    CNNB_UNAVAILABLE="no $CNNBENCH (the build failed)"
  elif [ ! -f "$CUDA_PLUGIN" ]; then
    CNNB_UNAVAILABLE="the build has no cuda plugin ($(grep -o 'CUDA off.*' <<<"$COMPONENTS" || echo 'libcnnb_device_cuda.so not built'))"
  elif [ ! -f "$CUDA_IMPL" ]; then
    CNNB_UNAVAILABLE="the cuda plugin's implementation (cuda/libcnnb_cuda_impl.so) did not build: see build.log"
  fi
  if [ -x "$CNNBENCH" ]; then
    timeout 30 "$CNNBENCH" --list_plugins > "$LOGS/list_plugins.log" 2>&1
    grep -iE 'cuda|rejected|cannot' "$LOGS/list_plugins.log"
    [ "$SMOKE" = 1 ] && ! grep -qE '^[[:space:]]*device[[:space:]]+cuda[[:space:]]' "$LOGS/list_plugins.log" &&
      smoke_fail "--list_plugins: no cuda device listed (see list_plugins.log in logs.tar.gz)"
  fi
  [ "$SMOKE" = 1 ] && [ -n "$CNNB_UNAVAILABLE" ] && smoke_fail "cnnbench --device=cuda: $CNNB_UNAVAILABLE"
fi
[ -n "$CNNB_UNAVAILABLE" ] && say "cnnbench side not run: $CNNB_UNAVAILABLE; the PyTorch side still runs"
write_report

# ---------------------------------------------------------------- (c) gpu tests
run_gpu_tests() {
  local limit
  limit=$(( $(left) - 60 ))
  [ "$limit" -gt "$TESTS_TIMEOUT_S" ] && limit=$TESTS_TIMEOUT_S
  local cmd=(ctest --test-dir "$BUILD" "${TEST_ARGS[@]}" --output-on-failure --timeout 120 "-j$TEST_JOBS")
  say "gpu tests ($(elapsed) s), at most $limit s"
  show "${cmd[@]}"
  if [ "$DRY_RUN" = 1 ]; then TESTS_STATE="dry run"; return; fi
  if [ "$limit" -lt 30 ]; then TESTS_STATE="not run: the budget is spent"; return; fi
  if [ ! -f "$BUILD/CTestTestfile.cmake" ]; then
    TESTS_STATE="not run: no tests configured (component CHECK off? see the components line)"
    return
  fi
  local t0 rc summary failed skipped
  t0=$(date +%s)
  timeout -k 5 "$limit" "${cmd[@]}" > "$OUT/ctest.log" 2>&1
  rc=$?
  summary=$(grep -m1 -E 'tests passed|No tests were found' "$OUT/ctest.log")
  failed=$(sed -n '/tests FAILED:/,$ s/^[[:space:]]*[0-9]* - \([^ ]*\) (\(.*\))$/\1 (\2)/p' "$OUT/ctest.log" |
           paste -sd ',' - | sed 's/,/, /g')
  skipped=$(grep -c 'Skipped' "$OUT/ctest.log")
  TESTS_STATE="${summary:-no summary (exit $rc)} in $(( $(date +%s) - t0 )) s; $skipped skipped"
  [ -n "$failed" ] && TESTS_STATE="$TESTS_STATE; FAILED: $failed"
  [ "$rc" = 124 ] || [ "$rc" = 137 ] && TESTS_STATE="$TESTS_STATE; cut off at $limit s"
  say "gpu tests: $TESTS_STATE"
  grep -E 'Test +#|tests passed|Skipped|\*\*\*' "$OUT/ctest.log" | head -n 60
  # The smoke: a summary of at least one test, none failed, the run not cut off.
  if [ "$SMOKE" = 1 ] && { ! [[ $summary =~ ^100%\ tests\ passed,\ 0\ tests\ failed\ out\ of\ [1-9] ]] ||
                           [ -n "$failed" ] || [ "$rc" != 0 ]; }; then
    smoke_fail "tests (ctest ${TEST_ARGS[*]}): $TESTS_STATE (exit $rc)"
  fi
}

# ---------------------------------------------------------------- (d) benchmarks
run_row() {
  local id=$1 cm=$2 tm=$3 prec=$4 batch=$5 mode=$6 est=$7 limit ips log alloc
  local tprec=$prec size=""
  # Start-up plus steps at three times the estimate (a slow first GPU version must still
  # finish and be measured).
  limit=$(( 60 + 3 * (WARMUP + STEPS) * est / 1000 ))
  if [ "$SMOKE" = 1 ]; then
    # Batch 2; the ResNets at 64x64 (the others' sizes are fixed: alexnet 227, vgg16 224 by
    # their dense layers, inception3 299 by its 8x8 pool); PyTorch on the CPU in bf16.
    batch=2
    case "$cm" in resnet*) size=64 ;; esac
    [ "$prec" = fp16 ] && tprec=bf16
    limit=240
  fi
  say "row $id ($(elapsed) s elapsed, $(left) s left)"

  # cnnbench
  if [ "$mode" = compile ]; then
    RES[$id,cnnb]="-"
  elif [ -n "$CNNB_UNAVAILABLE" ]; then
    RES[$id,cnnb]="not run: ${CNNB_UNAVAILABLE//|/\\|}"
  elif [ "$CNNB_TIMEOUTS" -ge 2 ]; then
    RES[$id,cnnb]="not run: two cnnbench runs timed out before"
  else
    log="$LOGS/cnnbench-$id.log"
    local cflags=(--device=cuda "--model=$cm" "--batch_size=$batch" "--num_batches=$STEPS"
                  "--num_warmup_batches=$WARMUP" --optimizer=momentum "--precision=$prec"
                  --display_every=10)
    [ "$mode" = infer ] && cflags+=(--forward_only)
    [ "$mode" = graphs ] && cflags+=(--cuda_graphs)
    [ "$mode" = nccl ] && cflags+=(--variable_update=replicated --all_reduce_spec=nccl)
    [ "$mode" = psgpu ] && cflags+=(--variable_update=parameter_server --local_parameter_device=gpu)
    [ -n "$size" ] && cflags+=("--image_size=$size")
    # The smoke's autotune choices (the fake's) stay in its logs, out of the user's cache.
    [ "$SMOKE" = 1 ] && cflags+=("--cudnn_autotune_cache=$LOGS/cudnn_autotune.tsv")
    # shellcheck disable=SC2206  # CNNB_FLAGS is a list of flags, split on purpose
    [ -n "${CNNB_FLAGS:-}" ] && cflags+=(${CNNB_FLAGS})
    run_bench "$log" "$limit" "$CNNBENCH" "${cflags[@]}"
    ips=$(images_per_sec "$log")
    if [ "$DRY_RUN" = 1 ]; then RES[$id,cnnb]="(dry run)"
    elif [ "$RUN_RC" = 0 ] && [ -n "$ips" ]; then RES[$id,cnnb]=$ips; RES[$id,cnnb_mem]=$RUN_MEM
    else RES[$id,cnnb]=$(failure_cell "$RUN_RC" "$log")
    fi
    # A graphs row whose recording failed fell back to the calls with a warning: its
    # figure is not one of graphs, and the cell says why.
    if [ "$mode" = graphs ] && [ "$DRY_RUN" = 0 ] && [ "$RUN_RC" = 0 ] &&
       ! grep -q -- '--cuda_graphs: [1-9][0-9]* recording(s)' "$log"; then
      local why
      why=$(grep -m1 -- 'warning: --cuda_graphs' "$log" | sed 's/.*--cuda_graphs: //; s/|/\\|/g' | cut -c1-160)
      RES[$id,cnnb]="${RES[$id,cnnb]} (graphs not used: ${why:-no count in the log})"
      # The fake records and replays stream captures as a GPU does (and aborts on what a
      # capture forbids), so no recording there means none on a GPU either.
      [ "$SMOKE" = 1 ] &&
        smoke_fail "row $id: no '--cuda_graphs: N recording(s)' line with N >= 1 in its log (${why:-no count, no warning}): the graphs row would measure no graphs on a GPU either"
    fi
    { [ "$RUN_RC" = 124 ] || [ "$RUN_RC" = 137 ]; } && CNNB_TIMEOUTS=$((CNNB_TIMEOUTS + 1))
    if [ "$SMOKE" = 1 ] && [ "$DRY_RUN" = 0 ]; then
      [[ ${RES[$id,cnnb]} =~ ^[0-9.]+ ]] || smoke_fail "row $id: cnnbench: ${RES[$id,cnnb]}"
      [ "$RUN_RC" = 0 ] && ! [[ ${RES[$id,cnnb_mem]:-} =~ ^([0-9]+|n/a)$ ]] &&
        smoke_fail "row $id: the cnnbench GPU MiB cell is '${RES[$id,cnnb_mem]:-}', not a number or n/a"
      case "$mode" in nccl|psgpu)
        [ "$RUN_RC" = 0 ] && ! grep -q 'NCCL' "$log" &&
          smoke_fail "row $id: its log never names NCCL (the strategy did not take the NCCL path)" ;;
      esac
    fi
  fi

  # PyTorch (an identical configuration run before is not run again; a graphs row's
  # PyTorch run is the eager training run)
  local tmode=$mode
  case "$mode" in graphs|nccl|psgpu) tmode=train ;; esac
  local key="$tm|$tprec|$batch|$tmode"
  if [ "$SMOKE" = 1 ] && [ "$TORCH_OK" != 0 ]; then
    RES[$id,torch]="not run: $PYTHON does not import torch and torchvision (the smoke allows it; a GPU run needs them)"
  elif [ -n "${TORCH_CACHE[$key]:-}" ]; then
    RES[$id,torch]="${RES[${TORCH_CACHE[$key]},torch]} (= ${TORCH_CACHE[$key]})"
    RES[$id,torch_mem]=${RES[${TORCH_CACHE[$key]},torch_mem]:--}
  else
    log="$LOGS/pytorch-$id.log"
    local pflags=("--model=$tm" "--batch_size=$batch" "--num_batches=$STEPS"
                  "--num_warmup_batches=$WARMUP" "--precision=$tprec")
    [ "$tmode" = infer ] && pflags+=(--inference)
    [ "$SMOKE" = 1 ] && pflags+=(--device=cpu)
    [ -n "$size" ] && pflags+=("--image_size=$size")
    [ "$mode" = compile ] && { pflags+=(--compile); limit=$((limit + 180)); }
    run_bench "$log" "$limit" "${PY_ENV[@]}" PYTHONUNBUFFERED=1 \
      "$PYTHON" bench/pytorch_gpu_train.py "${pflags[@]}"
    ips=$(images_per_sec "$log")
    if [ "$DRY_RUN" = 1 ]; then RES[$id,torch]="(dry run)"
    elif [ "$RUN_RC" = 0 ] && [ -n "$ips" ]; then
      RES[$id,torch]=$ips
      alloc=$(sed -n 's/^peak GPU memory MiB: //p' "$log")
      RES[$id,torch_mem]="$RUN_MEM / ${alloc:-n/a}"
      TORCH_CACHE[$key]=$id
    else RES[$id,torch]=$(failure_cell "$RUN_RC" "$log")
    fi
    [ "$SMOKE" = 1 ] && [ "$DRY_RUN" = 0 ] && ! [[ ${RES[$id,torch]} =~ ^[0-9.]+$ ]] &&
      smoke_fail "row $id: PyTorch (torch imports, so it must run): ${RES[$id,torch]}"
  fi
  write_report
}

tests_done=0
for r in "${ROWS[@]}"; do
  IFS='|' read -r id cm tm prec batch mode est target <<<"$r"
  row_wanted "$id" || continue
  # The tests run right after the decisive ResNet-50 fp16 rows.
  if [ "$tests_done" = 0 ] && [[ "$id" != resnet50-fp16 && "$id" != resnet50-fp16-infer &&
                                 "$id" != resnet50-fp16-graphs ]]; then
    [ "$RUN_TESTS" = 1 ] && run_gpu_tests
    tests_done=1
    write_report
  fi
  if [ "$mode" = compile ] && { [ "$RUN_COMPILE" = 0 ] || { [ "$DRY_RUN" = 0 ] && [ "$(left)" -lt 150 ]; }; }; then
    RES[$id,cnnb]="-"
    if [ "$SMOKE" = 1 ] && [ "$RUN_COMPILE" = 0 ]; then RES[$id,torch]="not run: --smoke runs no torch.compile"
    else RES[$id,torch]="not run: $([ "$RUN_COMPILE" = 0 ] && echo '--no-compile' || echo "under 150 s of the budget left")"
    fi
    continue
  fi
  run_row "$id" "$cm" "$tm" "$prec" "$batch" "$mode" "$est"
done
if [ "$tests_done" = 0 ] && [ "$RUN_TESTS" = 1 ]; then run_gpu_tests; fi

# ---------------------------------------------------------------- (e) the table
write_report
if [ "$SMOKE" = 1 ] && [ "$DRY_RUN" = 0 ]; then
  [ "$RUN_TESTS" = 1 ] && [[ $TESTS_STATE == "not run"* ]] && smoke_fail "tests: $TESTS_STATE"
  # The table holds one line per row asked for.
  wanted=0
  for r in "${ROWS[@]}"; do row_wanted "${r%%|*}" && wanted=$((wanted + 1)); done
  lines=$(( $(grep -c '^| ' "$REPORT") - 1 ))  # less the header
  [ "$lines" = "$wanted" ] || smoke_fail "the table: $lines rows for the $wanted asked for"
  [ "$wanted" -gt 0 ] || smoke_fail "--rows=$ROWS_WANTED: no such row"
  if ((${#SMOKE_FAILS[@]})); then
    SMOKE_VERDICT="FAILED (${#SMOKE_FAILS[@]}): $(printf '%s; ' "${SMOKE_FAILS[@]}" | sed 's/; $//')"
  else
    SMOKE_VERDICT="passed: every cnnbench row asked for ran on the fake, and every line and cell the full run parses was there"
    [ "$TORCH_OK" = 0 ] && SMOKE_VERDICT="$SMOKE_VERDICT; PyTorch's rows ran on the CPU"
  fi
  write_report
fi
say "done in $(elapsed) s; the table is $REPORT:"
echo
cat "$REPORT"
rc=0
if ((${#SMOKE_FAILS[@]})); then
  echo
  say "--smoke FAILED, ${#SMOKE_FAILS[@]} check(s):"
  printf '  %s\n' "${SMOKE_FAILS[@]}"
  rc=1
fi
# Let tee write the last lines before the script ends.
exec >&- 2>&-
wait "$TEE_PID" 2>/dev/null
exit "$rc"
