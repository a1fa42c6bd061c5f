#!/usr/bin/env bash
# time_to_accuracy.sh — issue 22's race on real data: LeNet (tf_cnn_benchmarks' structure,
# 1 input channel, 10 classes) trained on Fashion-MNIST to a test-set top-1 target, the
# wall time from the first step to the first evaluation that reaches it, evaluations
# included. cnnbench (--eval_during_training_every_n_epochs=1 --target_accuracy) against
# PyTorch (bench/pytorch_time_to_accuracy.py) with the same recipe: batch, SGD with
# Nesterov momentum, learning rate, L2 weight decay, no augmentation, pixels in [-1, 1], the
# 10,000 test images evaluated after every epoch, the same thread count, both pinned to the
# same cores (taskset). Each framework runs once per seed, the two interleaved seed by
# seed; the summary gives medians and ranges and the ratio of the medians.
#
# Then the batch-size curve the seed warns about (--curve): cnnbench alone at batch 32,
# 64, ..., 2048 with the learning rate scaled linearly from the race's (Goyal et al.) and a
# linear warm-up over --warmup_epochs, each until the target or --max_epochs: images/sec
# rising with the batch, the time (and epochs) to the target, the batches that never
# reach it. The curve is drawn as an SVG (bench/plot_time_to_accuracy.py).
#
# Usage: bench/time_to_accuracy.sh [--build=DIR] [--data_dir=DIR] [--seeds=1,2,3]
#          [--batch=64] [--lr=0.02] [--momentum=0.9] [--weight_decay=4e-5] [--target=0.90]
#          [--max_epochs=10] [--threads=2] [--cores=0,1] [--no-race] [--curve]
#          [--batches="32 64 128 256 512 1024 2048"] [--warmup_epochs=1] [--out=DIR]
# Needs the mnist datasource with the Debian package dataset-fashion-mnist (its IDX files
# under /usr/share/datasets/fashion-mnist) and PyTorch in $PYTHON (default: the venv
# /work/anchors when it has one, else python3). Logs and summary.md land in --out
# (default $BUILD/bench-results/time-to-accuracy-<date>). NO_BUILD=1 keeps the build.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${CNNB_BUILD:-$REPO/build-bench}
DATA=/usr/share/datasets/fashion-mnist
SEEDS=1,2,3 BATCH=64 LR=0.02 MOMENTUM=0.9 WD=4e-5 TARGET=0.90 MAX_EPOCHS=10 THREADS=2
CORES=0,1 RACE=1 CURVE=0 BATCHES="32 64 128 256 512 1024 2048" WARMUP=1 OUT=""
for a in "$@"; do
  case "$a" in
    --build=*) BUILD=${a#*=} ;;
    --data_dir=*) DATA=${a#*=} ;;
    --seeds=*) SEEDS=${a#*=} ;;
    --batch=*) BATCH=${a#*=} ;;
    --lr=*) LR=${a#*=} ;;
    --momentum=*) MOMENTUM=${a#*=} ;;
    --weight_decay=*) WD=${a#*=} ;;
    --target=*) TARGET=${a#*=} ;;
    --max_epochs=*) MAX_EPOCHS=${a#*=} ;;
    --threads=*) THREADS=${a#*=} ;;
    --cores=*) CORES=${a#*=} ;;
    --no-race) RACE=0 ;;
    --curve) CURVE=1 ;;
    --batches=*) BATCHES=${a#*=} ;;
    --warmup_epochs=*) WARMUP=${a#*=} ;;
    --out=*) OUT=${a#*=} ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "time_to_accuracy.sh: unknown argument '$a' (see --help)" >&2; exit 2 ;;
  esac
done
if [ -z "${PYTHON:-}" ]; then
  PYTHON=python3
  [ -x /work/anchors/bin/python ] && PYTHON=/work/anchors/bin/python
fi
BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || { echo "time_to_accuracy.sh: no build directory" >&2; exit 2; }
CNNBENCH="$BUILD/bin/cnnbench"
if [ "${NO_BUILD:-0}" != 1 ] && [ -f "$BUILD/CMakeCache.txt" ]; then
  cmake --build "$BUILD" -j2 > "$BUILD/bench-build.log" 2>&1 ||
    { echo "time_to_accuracy.sh: building $BUILD failed: see $BUILD/bench-build.log" >&2; exit 2; }
fi
[ -x "$CNNBENCH" ] || { echo "time_to_accuracy.sh: no $CNNBENCH" >&2; exit 2; }
ls "$DATA"/train-images-idx3-ubyte* >/dev/null 2>&1 ||
  { echo "time_to_accuracy.sh: no Fashion-MNIST in $DATA (apt-get install dataset-fashion-mnist)" >&2; exit 2; }
((RACE == 0)) || "$PYTHON" -c 'import torch' 2>/dev/null ||
  { echo "time_to_accuracy.sh: no PyTorch in $PYTHON (set PYTHON=, or pip install torch)" >&2; exit 2; }
OUT=${OUT:-$BUILD/bench-results/time-to-accuracy-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
export OMP_NUM_THREADS=$THREADS
START=$(date +%s)

# cnnbench's run of one recipe; prints "reached seconds epochs top1 images_per_sec".
cnnbench_run() { # LOG BATCH LR WARMUP SEED
  local log=$1 batch=$2 lr=$3 warmup=$4 seed=$5
  taskset -c "$CORES" "$CNNBENCH" --model=lenet --data_name=mnist --data_dir="$DATA" \
    --batch_size="$batch" --optimizer=momentum --momentum="$MOMENTUM" \
    --init_learning_rate="$lr" --num_learning_rate_warmup_epochs="$warmup" \
    --weight_decay="$WD" --num_epochs="$MAX_EPOCHS" --eval_during_training_every_n_epochs=1 \
    --target_accuracy="$TARGET" --num_warmup_batches=0 --num_intra_threads="$THREADS" \
    --seed="$seed" --display_every=100000 > "$log" 2>&1 || true
  local ips; ips=$(sed -n 's/^total images\/sec: \([0-9.]*\).*/\1/p' "$log")
  if grep -q '^Reached --target_accuracy' "$log"; then
    sed -n 's/^Reached --target_accuracy=[0-9.]*: top-1 \([0-9.]*\) at .* in \([0-9.]*\) s wall time, .*, \([0-9.]*\) epochs$/1 \2 \3 \1/p' "$log" |
      awk -v ips="$ips" '{printf "%s %s %.0f %s %s\n", $1, $2, $3, $4, ips}'
  else
    local best; best=$(sed -n 's/.*the best top-1 was \([0-9.]*\),.*/\1/p' "$log")
    echo "0 - $MAX_EPOCHS ${best:-0} ${ips:-0}"
  fi
}

pytorch_run() { # LOG BATCH LR WARMUP SEED
  local log=$1
  taskset -c "$CORES" "$PYTHON" "$REPO/bench/pytorch_time_to_accuracy.py" --data_dir="$DATA" \
    --batch_size="$2" --learning_rate="$3" --warmup_epochs="$4" --seed="$5" \
    --momentum="$MOMENTUM" --weight_decay="$WD" --target="$TARGET" --max_epochs="$MAX_EPOCHS" \
    --threads="$THREADS" > "$log" 2>&1 || true
  sed -n 's/^time_to_accuracy: reached=\([01]\) seconds=\([0-9.]*\) epochs=\([0-9]*\) top1=\([0-9.]*\) images_per_sec=\([0-9.]*\)$/\1 \2 \3 \4 \5/p' "$log" |
    awk '{ if ($1 == 0) $2 = "-"; print }'
}

# median and range of a column of numbers ("-" left out): "median [min, max]"
stats() { sort -g | awk '$1 != "-" { v[n++] = $1 } END {
  if (!n) { print "-"; exit }
  m = n % 2 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2
  printf "%.1f [%.1f, %.1f]", m, v[0], v[n - 1] }'; }
median() { sort -g | awk '$1 != "-" { v[n++] = $1 } END { if (n) print (n % 2 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2) }'; }

{
  echo "## Time to ${TARGET} top-1 on Fashion-MNIST, LeNet ($(date -u '+%Y-%m-%d %H:%M UTC'))"
  echo
  echo "- Machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores; both pinned to cores $CORES, $THREADS threads each; load average at start $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "- cnnbench commit $(git -C "$REPO" rev-parse --short HEAD) ($BUILD); PyTorch $("$PYTHON" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo none) ($PYTHON)"
  echo "- Recipe: batch $BATCH, SGD with Nesterov momentum $MOMENTUM, learning rate $LR, weight decay $WD, no augmentation, the 10,000 test images after every epoch, at most $MAX_EPOCHS epochs; wall time from the first step to the first evaluation with top-1 >= $TARGET, evaluations included"
  echo "- cnnbench: \`cnnbench --model=lenet --data_name=mnist --data_dir=$DATA --batch_size=$BATCH --optimizer=momentum --momentum=$MOMENTUM --init_learning_rate=$LR --weight_decay=$WD --num_epochs=$MAX_EPOCHS --eval_during_training_every_n_epochs=1 --target_accuracy=$TARGET --num_warmup_batches=0 --num_intra_threads=$THREADS --seed=S\`"
  echo "- PyTorch: \`bench/pytorch_time_to_accuracy.py --batch_size=$BATCH --learning_rate=$LR --momentum=$MOMENTUM --weight_decay=$WD --target=$TARGET --max_epochs=$MAX_EPOCHS --threads=$THREADS --seed=S\`"
} > "$OUT/summary.md"
cat "$OUT/summary.md"

if ((RACE)); then
  : > "$OUT/race.tsv"
  for seed in ${SEEDS//,/ }; do
    for fw in cnnbench pytorch; do
      r=$("${fw}_run" "$OUT/race-$fw-seed$seed.log" "$BATCH" "$LR" 0 "$seed")
      [ -n "$r" ] || r="0 - - 0 0"
      echo "   $fw seed $seed: reached seconds epochs top1 images/sec = $r"
      echo "$fw $seed $r" >> "$OUT/race.tsv"
    done
  done
  {
    echo
    echo "| framework | runs reaching $TARGET | seconds to $TARGET, median [range] | epochs | top-1 there | training images/sec, median |"
    echo "|---|---:|---:|---:|---:|---:|"
    for fw in cnnbench pytorch; do
      rows=$(awk -v f="$fw" '$1 == f' "$OUT/race.tsv")
      n=$(echo "$rows" | awk '$3 == 1' | wc -l)
      echo "| $fw | $n of $(echo "$rows" | wc -l) | $(echo "$rows" | awk '{print $4}' | stats) | $(echo "$rows" | awk '{print $5}' | tr '\n' ' ') | $(echo "$rows" | awk '{print $6}' | tr '\n' ' ') | $(echo "$rows" | awk '{print $7}' | median) |"
    done
    c=$(awk '$1 == "cnnbench" {print $4}' "$OUT/race.tsv" | median)
    p=$(awk '$1 == "pytorch" {print $4}' "$OUT/race.tsv" | median)
    if [ -n "$c" ] && [ -n "$p" ]; then
      echo
      echo "cnnbench's median time to $TARGET is $(awk -v c="$c" -v p="$p" 'BEGIN { printf "%.2f", c / p }')x PyTorch's (target: at most 0.6x)."
    fi
  } >> "$OUT/summary.md"
fi

if ((CURVE)); then
  : > "$OUT/curve.tsv"
  for b in $BATCHES; do
    lr=$(awk -v l="$LR" -v b="$b" -v b0="$BATCH" 'BEGIN { printf "%.6g", l * b / b0 }')
    r=$(cnnbench_run "$OUT/curve-batch$b.log" "$b" "$lr" "$WARMUP" 1)
    echo "   curve batch $b (lr $lr): reached seconds epochs top1 images/sec = $r"
    echo "$b $lr $r" >> "$OUT/curve.tsv"
  done
  "$PYTHON" "$REPO/bench/plot_time_to_accuracy.py" "$OUT/curve.tsv" "$OUT/time_to_accuracy.svg" \
    --target="$TARGET" --max_epochs="$MAX_EPOCHS" --title="LeNet on Fashion-MNIST, cnnbench, $THREADS threads"
  {
    echo
    echo "Batch-size curve (cnnbench; learning rate $LR x batch / $BATCH, linear warm-up over $WARMUP epoch(s), seed 1, at most $MAX_EPOCHS epochs):"
    echo
    echo "| batch | learning rate | training images/sec | seconds to $TARGET | epochs | best or reaching top-1 |"
    echo "|---:|---:|---:|---:|---:|---:|"
    awk '{ printf "| %s | %s | %.0f | %s | %s | %s |\n", $1, $2, $7, $3 == 1 ? $4 : "never", $3 == 1 ? $5 : ">" $5, $6 }' "$OUT/curve.tsv"
    echo
    echo "Chart: $OUT/time_to_accuracy.svg"
  } >> "$OUT/summary.md"
fi
echo "- Run time: $(( $(date +%s) - START )) s; load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/summary.md"
echo
cat "$OUT/summary.md"
