#!/usr/bin/env bash
# run_resnet50.sh — issue 3's benchmark in one run: ResNet-50 v1 training, batch 32,
# synthetic data, momentum SGD (Nesterov, as tf_cnn_benchmarks), fp32 and bf16, cnnbench's
# `cpu` device beside PyTorch (torchvision resnet50, same batch and optimizer, same thread
# count; bf16 as channels_last + autocast). Reports images/sec, achieved GFLOP/s against
# the machine's measured oneDNN convolution peak, peak resident memory (/usr/bin/time -v),
# and a per-op time breakdown of cnnbench's step (bench/cnnb_profile.c).
#
# Usage: bench/run_resnet50.sh [--build=DIR] [--batch=32] [--warmup=2] [--steps=5]
#                              [--threads=2] [--precisions="fp32 bf16"] [--out=DIR]
#                              [--no-pytorch] [--no-profile] [--no-peak]
# Defaults keep it near 10 minutes on 2 cores (a batch-32 ResNet-50 step is several
# seconds): 2 warm-up + 5 timed steps per run, and 1 warm-up + 2 profiled steps.
# Logs of every run and summary.md land in --out (default $BUILD/bench-results/...).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${CNNB_BUILD:-$REPO/build-bench}
BATCH=32 WARMUP=2 STEPS=5 THREADS=2 PRECISIONS="fp32 bf16" OUT=""
PYTORCH=1 PROFILE=1 PEAK=1 PROFILE_STEPS=2
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
    --no-profile) PROFILE=0 ;;
    --no-peak) PEAK=0 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "run_resnet50.sh: unknown argument '$a' (see --help)" >&2; exit 2 ;;
  esac
done
BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || { echo "run_resnet50.sh: no build directory" >&2; exit 2; }
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
  echo "== oneDNN convolution peak"
  "$PEAK_BIN" --threads="$THREADS" | tee "$OUT/peak.log"
  for dt in f32 bf16; do
    # median of forward, backward-data and backward-weights: what a training step's
    # convolutions could do at best.
    PEAK_GF[$dt]=$(awk -v dt="$dt" '$1 == "peak" && $2 == dt {s += $6; n++} END {if (n) printf "%.1f", s / n}' \
                   FS='[ :]+' "$OUT/peak.log")
  done
fi

FWD_V1=$(forward_gflops resnet50)
FWD_V15=$(forward_gflops resnet50_v1.5)   # torchvision's resnet50 is v1.5 (stride on the 3x3)
[ -n "$FWD_V1" ] || die "cnnbench --model=resnet50 --model_info printed no FLOPs"
echo "forward GFLOPs per image: resnet50 (v1) $FWD_V1, resnet50_v1.5 ${FWD_V15:-?}"

# --- the runs -----------------------------------------------------------------------
declare -A IPS RSS
for p in $PRECISIONS; do
  echo "== cnnbench resnet50 $p"
  cmd=("$CNNBENCH" --model=resnet50 --batch_size="$BATCH" --num_batches="$STEPS"
       --num_warmup_batches="$WARMUP" --optimizer=momentum --precision="$p" --device=cpu
       --num_intra_threads="$THREADS" --display_every=1)
  echo "${cmd[*]}" > "$OUT/cnnbench-$p.log"
  "$TIME" -v "${cmd[@]}" >> "$OUT/cnnbench-$p.log" 2>&1 || echo "(cnnbench $p failed: see $OUT/cnnbench-$p.log)"
  IPS[cnnb-$p]=$(value_of "$OUT/cnnbench-$p.log" "total images/sec:")
  RSS[cnnb-$p]=$(rss_mib "$OUT/cnnbench-$p.log")
  echo "   ${IPS[cnnb-$p]:-FAILED} images/sec, ${RSS[cnnb-$p]:-?} MiB peak RSS"
  if [ "$PYTORCH" = 1 ]; then
    echo "== pytorch resnet50 $p"
    cmd=("$PYTHON" "$REPO/bench/pytorch_train.py" --model=resnet50 --batch_size="$BATCH"
         --num_batches="$STEPS" --num_warmup_batches="$WARMUP" --precision="$p" --threads="$THREADS")
    echo "${cmd[*]}" > "$OUT/pytorch-$p.log"
    "$TIME" -v "${cmd[@]}" >> "$OUT/pytorch-$p.log" 2>&1 || echo "(pytorch $p failed: see $OUT/pytorch-$p.log)"
    IPS[pt-$p]=$(value_of "$OUT/pytorch-$p.log" "total images/sec:")
    RSS[pt-$p]=$(rss_mib "$OUT/pytorch-$p.log")
    echo "   ${IPS[pt-$p]:-FAILED} images/sec, ${RSS[pt-$p]:-?} MiB peak RSS"
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
  echo "| precision | framework | images/sec | achieved GFLOP/s | % of conv peak | peak RSS MiB |"
  echo "|---|---|---:|---:|---:|---:|"
  for p in $PRECISIONS; do
    dt=$([ "$p" = fp32 ] && echo f32 || echo "$p")
    g=$(gf "${IPS[cnnb-$p]:-}" "$FWD_V1")
    echo "| $p | cnnbench resnet50 (v1) | ${IPS[cnnb-$p]:--} | $g | $(pct "$g" "${PEAK_GF[$dt]:-}") | ${RSS[cnnb-$p]:--} |"
    if [ "$PYTORCH" = 1 ]; then
      g=$(gf "${IPS[pt-$p]:-}" "${FWD_V15:-$FWD_V1}")
      echo "| $p | PyTorch torchvision resnet50 (v1.5) | ${IPS[pt-$p]:--} | $g | $(pct "$g" "${PEAK_GF[$dt]:-}") | ${RSS[pt-$p]:--} |"
    fi
  done
  echo
  [ "$PEAK" = 1 ] && echo "oneDNN 3x3 conv peak (mean of fwd, bwd_d, bwd_w medians): fp32 ${PEAK_GF[f32]:-?} GFLOP/s, bf16 ${PEAK_GF[bf16]:-?} GFLOP/s"
  echo "Forward GFLOPs/image: resnet50 v1 $FWD_V1, v1.5 ${FWD_V15:-?} (training counted as 3x)"
  if [ "$PYTORCH" = 1 ]; then
    echo
    echo "| target (issue 3) | measured | met? |"
    echo "|---|---|---|"
    for p in $PRECISIONS; do
      want=$([ "$p" = fp32 ] && echo 1.5 || echo 2)
      r=$(ratio "${IPS[cnnb-$p]:-}" "${IPS[pt-$p]:-}")
      met=$(awk -v r="$r" -v w="$want" 'BEGIN { print (r != "-" && r + 0 >= w) ? "yes" : "no" }')
      echo "| $p images/sec >= ${want}x PyTorch | ${r}x | $met |"
      m=$(awk -v a="${RSS[cnnb-$p]:-}" -v b="${RSS[pt-$p]:-}" 'BEGIN { print (a != "" && b != "" && a + 0 <= b + 0) ? "yes" : "no" }')
      echo "| $p peak RSS <= PyTorch's | ${RSS[cnnb-$p]:--} vs ${RSS[pt-$p]:--} MiB | $m |"
    done
  fi
  echo
  echo "Run time: $(( $(date +%s) - START )) s. Logs: $OUT"
} > "$OUT/summary.md"
echo
cat "$OUT/summary.md"
