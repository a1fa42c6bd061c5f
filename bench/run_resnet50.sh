#!/usr/bin/env bash
# run_resnet50.sh — issue 3's benchmark in one run: ResNet-50 v1 training, batch 32,
# synthetic data, momentum SGD (Nesterov, as tf_cnn_benchmarks), fp32 and bf16, cnnbench's
# `cpu` device beside PyTorch (torchvision resnet50, same batch and optimizer, same thread
# count; bf16 as channels_last + autocast). Reports images/sec, achieved GFLOP/s against
# the machine's measured oneDNN convolution peak, peak resident memory (/usr/bin/time -v),
# and a per-op time breakdown of cnnbench's step (bench/cnnb_profile.c). torchvision's
# resnet50 is ResNet v1.5 (stride on the 3x3), so cnnbench's resnet50_v1.5 runs too, as
# the same-network comparison (--no-v15 skips it); the targets use v1, as issue 3 says.
# --tf=DIR also runs TensorFlow's own tf_cnn_benchmarks (DIR: its scripts/tf_cnn_benchmarks
# folder, e.g. from github.com/tensorflow/benchmarks) with $PYTHON's tensorflow and
# tf_keras (TF_USE_LEGACY_KERAS=1): the same models (its resnet50 is v1, resnet50_v1.5
# v1.5), batch, steps, Nesterov momentum and threads, NHWC on the cpu; fp32 only (it has
# no bf16 on the cpu).
#
# Usage: bench/run_resnet50.sh [--build=DIR] [--batch=32] [--warmup=2] [--steps=5]
#                              [--threads=2] [--precisions="fp32 bf16"] [--out=DIR]
#                              [--no-pytorch] [--no-profile] [--no-peak] [--no-v15]
#                              [--pytorch-blas=system|openblas] [--tf=DIR]
# Defaults keep it near 5 minutes on an idle 2-core machine (a batch-32 ResNet-50 step
# takes 2-8 s): 2 warm-up + 5 timed steps per run, and 1 warm-up + 2 profiled steps.
# Logs of every run and summary.md land in --out (default $BUILD/bench-results/...).
# The build is brought up to date first (NO_BUILD=1 in the environment skips that).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${CNNB_BUILD:-$REPO/build-bench}
BATCH=32 WARMUP=2 STEPS=5 THREADS=2 PRECISIONS="fp32 bf16" OUT=""
PYTORCH=1 PROFILE=1 PEAK=1 V15=1 PROFILE_STEPS=2 TF_DIR=""
for a in "$@"; do
  case "$a" in
    --build=*) BUILD=${a#*=} ;;
    --batch=*) BATCH=${a#*=} ;;
    --warmup=*) WARMUP=${a#*=} ;;
    --steps=*) STEPS=${a#*=} ;;
    --threads=*) THREADS=${a#*=} ;;
    --precisions=*) PRECISIONS=${a#*=} ;;
    --out=*) OUT=${a#*=} ;;
    --no-pytorch) PYTORCH=0 ;;
    --pytorch-blas=*) PYTORCH_BLAS=${a#*=} ;;
    --no-profile) PROFILE=0 ;;
    --no-peak) PEAK=0 ;;
    --no-v15) V15=0 ;;
    --tf=*) TF_DIR=${a#*=} ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    *) echo "run_resnet50.sh: unknown argument '$a' (see --help)" >&2; exit 2 ;;
  esac
done
BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || { echo "run_resnet50.sh: no build directory" >&2; exit 2; }
if [ -n "$TF_DIR" ] && [ ! -f "$TF_DIR/tf_cnn_benchmarks.py" ]; then
  echo "run_resnet50.sh: --tf=$TF_DIR holds no tf_cnn_benchmarks.py" >&2; exit 2
fi
source "$REPO/bench/lib.sh"
bench_prepare
OUT=${OUT:-$BUILD/bench-results/resnet50-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
export OMP_NUM_THREADS=$THREADS
START=$(date +%s)

{
  echo "## ResNet-50 training, batch $BATCH, $THREADS threads ($(date -u '+%Y-%m-%d %H:%M UTC'))"
  echo
  machine_info
  echo "- Steps: $WARMUP warm-up + $STEPS timed per run (images/sec over the timed steps);"
  echo "  profile: 1 warm-up + $PROFILE_STEPS timed steps"
} > "$OUT/header.md"
cat "$OUT/header.md"

# --- the machine's peak -------------------------------------------------------------
declare -A PEAK_GF
if [ "$PEAK" = 1 ]; then
  # ResNet-50's own 3x3 convolutions at batch 32 (each 7.4 GFLOP per pass); oneDNN's
  # speed depends on the shape, so the peak is the best shape's mean of forward,
  # backward-data and backward-weights medians: what a training step's convolutions
  # could do at best on this machine.
  echo "== oneDNN convolution peak (ResNet-50's 3x3 shapes, batch 32)"
  : > "$OUT/peak.log"
  for shape in "64 56" "128 28" "256 14" "512 7"; do
    set -- $shape
    "$PEAK_BIN" --threads="$THREADS" --mb=32 --ic="$1" --oc="$1" --hw="$2" | tee -a "$OUT/peak.log"
  done
  set --
  for dt in f32 bf16; do
    PEAK_GF[$dt]=$(awk -F'[ :,]+' -v dt="$dt" '
      /^oneDNN/ {shape++}
      $1 == "peak" && $2 == dt {s[shape] += $7; n[shape]++}
      END {for (k in s) {m = s[k] / n[k]; if (m > best) best = m}; if (best) printf "%.1f", best}' "$OUT/peak.log")
  done
fi

FWD_V1=$(forward_gflops resnet50)
FWD_V15=$(forward_gflops resnet50_v1.5)   # torchvision's resnet50 is v1.5 (stride on the 3x3)
[ -n "$FWD_V1" ] || die "cnnbench --model=resnet50 --model_info printed no FLOPs"
echo "forward GFLOPs per image: resnet50 (v1) $FWD_V1, resnet50_v1.5 ${FWD_V15:-?}"

# --- the runs -----------------------------------------------------------------------
declare -A IPS RSS CPU
# measure KEY LOG CMD...: runs CMD under /usr/bin/time -v into LOG and keeps its
# images/sec, peak RSS and CPU share under KEY.
measure() {
  local key=$1 log=$2; shift 2
  echo "$*" > "$log"
  "$TIME" -v "$@" >> "$log" 2>&1 || echo "   (failed: see $log)"
  IPS[$key]=$(value_of "$log" "total images/sec:")
  RSS[$key]=$(rss_mib "$log")
  CPU[$key]=$(cpu_pct "$log")
  echo "   ${IPS[$key]:-FAILED} images/sec, ${RSS[$key]:-?} MiB peak RSS, ${CPU[$key]:-?}% CPU"
}
for p in $PRECISIONS; do
  for m in resnet50 $([ "$V15" = 1 ] && echo resnet50_v1.5); do
    echo "== cnnbench $m $p"
    measure "$m-$p" "$OUT/cnnbench-$m-$p.log" "$CNNBENCH" --model="$m" --batch_size="$BATCH" \
      --num_batches="$STEPS" --num_warmup_batches="$WARMUP" --optimizer=momentum \
      --precision="$p" --device=cpu --num_intra_threads="$THREADS" --display_every=1
  done
  if [ "$PYTORCH" = 1 ]; then
    echo "== pytorch resnet50 $p"
    measure "pt-$p" "$OUT/pytorch-$p.log" "${PYTORCH_ENV[@]}" "$PYTHON" "$REPO/bench/pytorch_train.py" \
      --model=resnet50 --batch_size="$BATCH" --num_batches="$STEPS" \
      --num_warmup_batches="$WARMUP" --precision="$p" --threads="$THREADS"
  fi
  if [ -n "$TF_DIR" ] && [ "$p" = fp32 ]; then
    for m in resnet50 $([ "$V15" = 1 ] && echo resnet50_v1.5); do
      echo "== tf_cnn_benchmarks $m $p"
      measure "tf-$m-$p" "$OUT/tf_cnn_benchmarks-$m-$p.log" env TF_USE_LEGACY_KERAS=1 \
        TF_CPP_MIN_LOG_LEVEL=2 "$PYTHON" "$TF_DIR/tf_cnn_benchmarks.py" --device=cpu \
        --data_format=NHWC --model="$m" --batch_size="$BATCH" --num_batches="$STEPS" \
        --num_warmup_batches="$WARMUP" --optimizer=momentum --num_intra_threads="$THREADS" \
        --num_inter_threads=1 --variable_update=parameter_server --local_parameter_device=cpu
    done
  fi
done

if [ "$PROFILE" = 1 ]; then
  for p in $PRECISIONS; do
    echo "== cnnb_profile resnet50 $p"
    "$PROFILE_BIN" --model=resnet50 --batch_size="$BATCH" --num_batches="$PROFILE_STEPS" \
      --num_warmup_batches=1 --optimizer=momentum --precision="$p" --device=cpu \
      --num_intra_threads="$THREADS" --top=20 > "$OUT/profile-$p.log" 2>&1 ||
      echo "(profile $p failed: see $OUT/profile-$p.log)"
    sed -n '/^profile:/,$p' "$OUT/profile-$p.log"
  done
fi

# --- the table ----------------------------------------------------------------------
# gf IPS FWD: achieved training GFLOP/s = images/sec x 3 x forward FLOPs per image.
gf() { [ -n "$1" ] && [ -n "$2" ] && calc "$1 * 3 * $2" 1 || echo "-"; }
pct() { [ -n "$1" ] && [ -n "$2" ] && [ "$1" != "-" ] && calc "100 * $1 / $2" 0 || echo "-"; }
ratio() { [ -n "$1" ] && [ -n "$2" ] && calc "$1 / $2" 2 || echo "-"; }
{
  cat "$OUT/header.md"
  echo
  echo "| precision | framework | images/sec | achieved GFLOP/s | % of conv peak | peak RSS MiB | CPU % |"
  echo "|---|---|---:|---:|---:|---:|---:|"
  for p in $PRECISIONS; do
    dt=$([ "$p" = fp32 ] && echo f32 || echo "$p")
    g=$(gf "${IPS[resnet50-$p]:-}" "$FWD_V1")
    echo "| $p | cnnbench resnet50 (v1) | ${IPS[resnet50-$p]:--} | $g | $(pct "$g" "${PEAK_GF[$dt]:-}") | ${RSS[resnet50-$p]:--} | ${CPU[resnet50-$p]:--} |"
    if [ "$V15" = 1 ]; then
      g=$(gf "${IPS[resnet50_v1.5-$p]:-}" "$FWD_V15")
      echo "| $p | cnnbench resnet50_v1.5 | ${IPS[resnet50_v1.5-$p]:--} | $g | $(pct "$g" "${PEAK_GF[$dt]:-}") | ${RSS[resnet50_v1.5-$p]:--} | ${CPU[resnet50_v1.5-$p]:--} |"
    fi
    if [ "$PYTORCH" = 1 ]; then
      g=$(gf "${IPS[pt-$p]:-}" "${FWD_V15:-$FWD_V1}")
      echo "| $p | PyTorch torchvision resnet50 (= v1.5) | ${IPS[pt-$p]:--} | $g | $(pct "$g" "${PEAK_GF[$dt]:-}") | ${RSS[pt-$p]:--} | ${CPU[pt-$p]:--} |"
    fi
    if [ -n "$TF_DIR" ] && [ "$p" = fp32 ]; then
      g=$(gf "${IPS[tf-resnet50-$p]:-}" "$FWD_V1")
      echo "| $p | tf_cnn_benchmarks resnet50 (v1) | ${IPS[tf-resnet50-$p]:--} | $g | $(pct "$g" "${PEAK_GF[$dt]:-}") | ${RSS[tf-resnet50-$p]:--} | ${CPU[tf-resnet50-$p]:--} |"
      if [ "$V15" = 1 ]; then
        g=$(gf "${IPS[tf-resnet50_v1.5-$p]:-}" "$FWD_V15")
        echo "| $p | tf_cnn_benchmarks resnet50_v1.5 | ${IPS[tf-resnet50_v1.5-$p]:--} | $g | $(pct "$g" "${PEAK_GF[$dt]:-}") | ${RSS[tf-resnet50_v1.5-$p]:--} | ${CPU[tf-resnet50_v1.5-$p]:--} |"
      fi
    fi
  done
  echo
  [ "$PEAK" = 1 ] && echo "oneDNN 3x3 conv peak (best ResNet-50 3x3 shape, mean of its fwd, bwd_d, bwd_w medians): fp32 ${PEAK_GF[f32]:-?} GFLOP/s, bf16 ${PEAK_GF[bf16]:-?} GFLOP/s"
  echo "Forward GFLOPs/image: resnet50 v1 $FWD_V1, v1.5 ${FWD_V15:-?} (training counted as 3x)."
  echo "CPU %: /usr/bin/time's share of the CPU over the whole process (setup included);"
  echo "about $((THREADS * 100)) means the run had its $THREADS cores to itself."
  if [ "$PYTORCH" = 1 ]; then
    echo
    echo "| target (issue 3) | measured | met? |"
    echo "|---|---|---|"
    for p in $PRECISIONS; do
      want=$([ "$p" = fp32 ] && echo 1.5 || echo 2)
      r=$(ratio "${IPS[resnet50-$p]:-}" "${IPS[pt-$p]:-}")
      met=$(awk -v r="$r" -v w="$want" 'BEGIN { print (r != "-" && r + 0 >= w) ? "yes" : "no" }')
      echo "| $p images/sec >= ${want}x PyTorch (resnet50 v1 vs torchvision) | ${r}x | $met |"
      if [ "$V15" = 1 ]; then
        echo "| (same network: resnet50_v1.5 vs torchvision) | $(ratio "${IPS[resnet50_v1.5-$p]:-}" "${IPS[pt-$p]:-}")x | |"
      fi
      m=$(awk -v a="${RSS[resnet50-$p]:-}" -v b="${RSS[pt-$p]:-}" 'BEGIN { print (a != "" && b != "" && a + 0 <= b + 0) ? "yes" : "no" }')
      echo "| $p peak RSS <= PyTorch's | ${RSS[resnet50-$p]:--} vs ${RSS[pt-$p]:--} MiB | $m |"
    done
  fi
  if [ -n "$TF_DIR" ]; then
    echo
    echo "| against tf_cnn_benchmarks (fp32, same model) | cnnbench / tf |"
    echo "|---|---|"
    for m in resnet50 $([ "$V15" = 1 ] && echo resnet50_v1.5); do
      echo "| $m | $(ratio "${IPS[$m-fp32]:-}" "${IPS[tf-$m-fp32]:-}")x |"
    done
  fi
  echo
  echo "Run time: $(( $(date +%s) - START )) s; load average at end: $(cut -d" " -f1-3 /proc/loadavg). Logs: $OUT"
} > "$OUT/summary.md"
echo
cat "$OUT/summary.md"
