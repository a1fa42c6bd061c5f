#!/usr/bin/env bash
# run_models.sh — issue 4's table: training images/sec on this CPU for every ImageNet
# model of the zoo, fp32 and bf16, with PyTorch/torchvision beside it for the models
# torchvision has (alexnet, vgg16, resnet50/101/152, inception_v3, googlenet,
# mobilenet_v2). Synthetic data, momentum SGD, the same batch for both frameworks.
#
# Usage: bench/run_models.sh [--build=DIR] [--batch=32] [--warmup=1] [--steps=3]
#                            [--threads=2] [--precisions="fp32 bf16"] [--models="..."]
#                            [--no-pytorch | --only-pytorch] [--pytorch-blas=system|openblas]
#                            [--timeout=900] [--out=DIR]
# The models' default batches (up to 512) would take hours on 2 cores, so every model
# runs at --batch (default 32, as issue 3's ResNet-50) with 1 warm-up and 3 timed steps:
# about 25 minutes for everything on an idle machine. A run that fails or passes --timeout seconds is recorded as such and the
# script goes on. Results: results.csv (one row per run, written as it goes) and
# summary.md in --out (default $BUILD/bench-results/models-<time>). The build is brought
# up to date first (NO_BUILD=1 in the environment skips that).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${CNNB_BUILD:-$REPO/build-bench}
BATCH=32 WARMUP=1 STEPS=3 THREADS=2 PRECISIONS="fp32 bf16" OUT="" PYTORCH=1 CNNB=1 LIMIT=900
MODELS="trivial lenet alexnet overfeat googlenet vgg11 vgg16 vgg19 inception3 inception4
resnet50 resnet50_v1.5 resnet50_v2 resnet101 resnet101_v2 resnet152 resnet152_v2 mobilenet"
for a in "$@"; do
  case "$a" in
    --build=*) BUILD=${a#*=} ;;
    --batch=*) BATCH=${a#*=} ;;
    --warmup=*) WARMUP=${a#*=} ;;
    --steps=*) STEPS=${a#*=} ;;
    --threads=*) THREADS=${a#*=} ;;
    --precisions=*) PRECISIONS=${a#*=} ;;
    --models=*) MODELS=${a#*=} ;;
    --timeout=*) LIMIT=${a#*=} ;;
    --out=*) OUT=${a#*=} ;;
    --no-pytorch) PYTORCH=0 ;;
    --only-pytorch) CNNB=0 ;;
    --pytorch-blas=*) PYTORCH_BLAS=${a#*=} ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "run_models.sh: unknown argument '$a' (see --help)" >&2; exit 2 ;;
  esac
done
BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || { echo "run_models.sh: no build directory" >&2; exit 2; }
source "$REPO/bench/lib.sh"
bench_prepare
OUT=${OUT:-$BUILD/bench-results/models-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
export OMP_NUM_THREADS=$THREADS
START=$(date +%s)

# cnnbench name -> torchvision model (pytorch_train.py's names). torchvision's ResNets
# are v1.5 (stride on the 3x3), so they sit beside cnnbench's v1 rows with that caveat,
# and beside resnet50_v1.5 as the exact match.
declare -A TV=([alexnet]=alexnet [vgg16]=vgg16 [resnet50]=resnet50 [resnet50_v1.5]=resnet50
               [resnet101]=resnet101 [resnet152]=resnet152 [inception3]=inception_v3
               [googlenet]=googlenet [mobilenet]=mobilenet_v2)

{
  echo "## Every ImageNet model: training images/sec, batch $BATCH, $THREADS threads ($(date -u '+%Y-%m-%d %H:%M UTC'))"
  echo
  machine_info
  echo "- Steps: $WARMUP warm-up + $STEPS timed per run, synthetic data, momentum SGD"
} > "$OUT/header.md"
cat "$OUT/header.md"
echo "framework,model,precision,batch,images_per_sec,peak_rss_mib,cpu_percent,status" > "$OUT/results.csv"

# run_one FRAMEWORK MODEL PRECISION LOG CMD...: runs under /usr/bin/time -v and a
# timeout, appends a CSV row, and leaves the number in $IPS_OUT.
run_one() {
  local fw=$1 model=$2 prec=$3 log=$4; shift 4
  echo "$*" > "$log"
  local status=ok
  timeout "$LIMIT" "$TIME" -v "$@" >> "$log" 2>&1 || status=$([ $? = 124 ] && echo timeout || echo failed)
  IPS_OUT=$(value_of "$log" "total images/sec:")
  [ -n "$IPS_OUT" ] || { [ "$status" = ok ] && status=failed; }
  local rss cpu; rss=$(rss_mib "$log"); cpu=$(cpu_pct "$log")
  echo "$fw,$model,$prec,$BATCH,${IPS_OUT},${rss},${cpu},$status" >> "$OUT/results.csv"
  printf '  %-9s %-14s %-5s %8s images/sec %6s MiB %4s%% CPU  %s\n' "$fw" "$model" "$prec" \
    "${IPS_OUT:--}" "${rss:--}" "${cpu:--}" "$status"
}

declare -A R FWD
for m in $MODELS; do
  FWD[$m]=$(forward_gflops "$m")
  if [ -z "${FWD[$m]}" ]; then echo "  (no model $m in this build: skipped)"; continue; fi
  for p in $PRECISIONS; do
    [ "$CNNB" = 1 ] || continue
    run_one cnnbench "$m" "$p" "$OUT/cnnbench-$m-$p.log" "$CNNBENCH" --model="$m" \
      --batch_size="$BATCH" --num_batches="$STEPS" --num_warmup_batches="$WARMUP" \
      --optimizer=momentum --precision="$p" --device=cpu --num_intra_threads="$THREADS"
    R[cnnb-$m-$p]=$IPS_OUT
  done
done
if [ "$PYTORCH" = 1 ]; then
  declare -A DONE
  for m in $MODELS; do
    tv=${TV[$m]:-}
    [ -n "$tv" ] && [ -z "${DONE[$tv]:-}" ] || continue
    DONE[$tv]=1
    for p in $PRECISIONS; do
      run_one pytorch "$tv" "$p" "$OUT/pytorch-$tv-$p.log" "${PYTORCH_ENV[@]}" "$PYTHON" "$REPO/bench/pytorch_train.py" \
        --model="$tv" --batch_size="$BATCH" --num_batches="$STEPS" \
        --num_warmup_batches="$WARMUP" --precision="$p" --threads="$THREADS"
      R[pt-$tv-$p]=$IPS_OUT
    done
  done
fi

# --- the table ----------------------------------------------------------------------
cell() { [ -n "${1:-}" ] && echo "$1" || echo "-"; }
ratio() { [ -n "${1:-}" ] && [ -n "${2:-}" ] && calc "$1 / $2" 2 || echo "-"; }
gflops() { [ -n "${1:-}" ] && [ -n "${2:-}" ] && calc "$1 * 3 * $2" 0 || echo "-"; }
{
  cat "$OUT/header.md"
  echo
  head="| model | fwd GFLOPs/img |"
  rule="|---|---:|"
  for p in $PRECISIONS; do
    head="$head cnnbench $p img/s | GFLOP/s |"
    rule="$rule---:|---:|"
    [ "$PYTORCH" = 1 ] && head="$head PyTorch $p img/s | cnnbench / PyTorch |" && rule="$rule---:|---:|"
  done
  echo "$head"; echo "$rule"
  for m in $MODELS; do
    [ -n "${FWD[$m]:-}" ] || continue
    tv=${TV[$m]:-}
    row="| $m${tv:+ (torchvision $tv)} | ${FWD[$m]} |"
    for p in $PRECISIONS; do
      c=${R[cnnb-$m-$p]:-}
      row="$row $(cell "$c") | $(gflops "$c" "${FWD[$m]}") |"
      if [ "$PYTORCH" = 1 ]; then
        t=${tv:+${R[pt-$tv-$p]:-}}
        row="$row $(cell "$t") | $(ratio "$c" "$t") |"
      fi
    done
    echo "$row"
  done
  echo
  echo "GFLOP/s = images/sec x 3 x forward GFLOPs (conv + dense, multiply-add = 2) from"
  echo "\`cnnbench --model_info\`. Peak RSS and failures per run: results.csv."
  echo
  echo "Run time: $(( $(date +%s) - START )) s; load average at end: $(cut -d" " -f1-3 /proc/loadavg). Logs: $OUT"
} > "$OUT/summary.md"
echo
cat "$OUT/summary.md"
