#!/usr/bin/env bash
# compare_builds.sh — "not worse than before": two cnnbench builds (say, the last release
# and a change) side by side in one run, on run_resnet50.sh's command line (ResNet-50
# training, batch 32, momentum, synthetic data, 2 threads). Each precision runs in the
# order A B B A, so a machine that speeds up or slows down during the run weighs on both
# builds alike; each build's figure is the mean of its two runs.
#
# Usage: bench/compare_builds.sh --before=BUILD_DIR --after=BUILD_DIR [--model=resnet50]
#                                [--batch=32] [--warmup=2] [--steps=5] [--threads=2]
#                                [--precisions="fp32 bf16"] [--out=DIR]
# The build directories are used as they are (nothing is rebuilt). Logs and summary.md
# land in --out (default ./compare-results/<date>).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
BEFORE="" AFTER="" MODEL=resnet50 BATCH=32 WARMUP=2 STEPS=5 THREADS=2 PRECISIONS="fp32 bf16" OUT=""
for a in "$@"; do
  case "$a" in
    --before=*) BEFORE=${a#*=} ;;
    --after=*) AFTER=${a#*=} ;;
    --model=*) MODEL=${a#*=} ;;
    --batch=*) BATCH=${a#*=} ;;
    --warmup=*) WARMUP=${a#*=} ;;
    --steps=*) STEPS=${a#*=} ;;
    --threads=*) THREADS=${a#*=} ;;
    --precisions=*) PRECISIONS=${a#*=} ;;
    --out=*) OUT=${a#*=} ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "compare_builds.sh: unknown argument '$a' (see --help)" >&2; exit 2 ;;
  esac
done
[ -x "$BEFORE/bin/cnnbench" ] || { echo "compare_builds.sh: --before=$BEFORE has no bin/cnnbench" >&2; exit 2; }
[ -x "$AFTER/bin/cnnbench" ] || { echo "compare_builds.sh: --after=$AFTER has no bin/cnnbench" >&2; exit 2; }
BUILD=$AFTER
source "$REPO/bench/lib.sh"
OUT=${OUT:-$PWD/compare-results/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
export OMP_NUM_THREADS=$THREADS

commit_of() { git -C "$1" rev-parse --short HEAD 2>/dev/null || echo "?"; }
declare -A SUM N
run() { # run LABEL BUILD PRECISION INDEX
  local log="$OUT/$1-$3-$4.log"
  "$2/bin/cnnbench" --model="$MODEL" --batch_size="$BATCH" --num_batches="$STEPS" \
    --num_warmup_batches="$WARMUP" --optimizer=momentum --precision="$3" --device=cpu \
    --num_intra_threads="$THREADS" --display_every=1 > "$log" 2>&1 || { echo "   $1 $3 failed: see $log"; return; }
  local ips; ips=$(value_of "$log" "total images/sec:")
  echo "   $1 $3 run $4: $ips images/sec"
  SUM[$1-$3]=$(awk -v a="${SUM[$1-$3]:-0}" -v b="$ips" 'BEGIN { print a + b }')
  N[$1-$3]=$(( ${N[$1-$3]:-0} + 1 ))
}
START=$(date +%s)
{
  echo "## $MODEL training, batch $BATCH, $THREADS threads: before vs after ($(date -u '+%Y-%m-%d %H:%M UTC'))"
  echo
  echo "- Machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores; load average at start $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "- before: $BEFORE (commit $(commit_of "$BEFORE/..")); after: $AFTER (commit $(commit_of "$AFTER/.."))"
  echo "- Each: \`cnnbench --model=$MODEL --batch_size=$BATCH --num_batches=$STEPS --num_warmup_batches=$WARMUP --optimizer=momentum --precision=P --device=cpu --num_intra_threads=$THREADS\`, run in the order before, after, after, before"
} > "$OUT/summary.md"
cat "$OUT/summary.md"
for p in $PRECISIONS; do
  echo "== $p"
  run before "$BEFORE" "$p" 1
  run after "$AFTER" "$p" 1
  run after "$AFTER" "$p" 2
  run before "$BEFORE" "$p" 2
done
{
  echo
  echo "| precision | before images/sec | after images/sec | after / before |"
  echo "|---|---:|---:|---:|"
  for p in $PRECISIONS; do
    b=$(awk -v s="${SUM[before-$p]:-0}" -v n="${N[before-$p]:-0}" 'BEGIN { if (n) printf "%.2f", s / n; else print "-" }')
    a=$(awk -v s="${SUM[after-$p]:-0}" -v n="${N[after-$p]:-0}" 'BEGIN { if (n) printf "%.2f", s / n; else print "-" }')
    echo "| $p | $b | $a | $(calc "$a / $b" 3) |"
  done
  echo
  echo "Run time: $(( $(date +%s) - START )) s; load average at end: $(cut -d' ' -f1-3 /proc/loadavg). Logs: $OUT"
} >> "$OUT/summary.md"
echo
cat "$OUT/summary.md"
