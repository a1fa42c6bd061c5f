#!/usr/bin/env bash
# real_vs_synthetic.sh — issue 10's second benchmark: ResNet-50 training on the cpu device
# with real data (the photo corpus, through the imagenet datasource) against synthetic
# data, same batch, steps and flags; target: real within 5% of synthetic when the input
# pipeline has a core of its own.
#
# The cores: both runs are pinned to the same two cores (taskset -c $CORES); the compute
# gets one thread (--num_intra_threads=1) and the real run's pipeline one decoder thread
# (--datasets_num_private_threads=1), so compute has one core and the pipeline the other.
# The synthetic run has the second core idle. Runs go in the order synthetic, real, real,
# synthetic (ABBA, repeated --rounds times) so a drift in the machine's load falls on both
# sides; /usr/bin/time records each run's CPU time, so the pipeline's cost shows.
#
# Usage: bench/real_vs_synthetic.sh [--corpus=DIR] [--records] [--batch=32] [--steps=10]
#          [--warmup=2] [--precision=fp32] [--rounds=1] [--cores=0,1] [--out=DIR]
# --records reads the corpus's TFRecord shards (DIR-records, made by input_pipeline.sh or
# cnnbench-mkrecords) instead of its JPEG folder. Env: BUILD (default REPO/build).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$REPO/build}
CORPUS=$BUILD/bench-data/photos-mixed
RECORDS=0
BATCH=32
STEPS=10
WARMUP=2
PRECISION=fp32
ROUNDS=1
CORES=0,1
OUT=""
for arg in "$@"; do
  case "$arg" in
    --corpus=*) CORPUS=${arg#*=} ;;
    --records) RECORDS=1 ;;
    --batch=*) BATCH=${arg#*=} ;;
    --steps=*) STEPS=${arg#*=} ;;
    --warmup=*) WARMUP=${arg#*=} ;;
    --precision=*) PRECISION=${arg#*=} ;;
    --rounds=*) ROUNDS=${arg#*=} ;;
    --cores=*) CORES=${arg#*=} ;;
    --out=*) OUT=${arg#*=} ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "real_vs_synthetic.sh: unknown argument $arg (see --help)" >&2; exit 2 ;;
  esac
done
OUT=${OUT:-$BUILD/bench-results/real-vs-synthetic-$(date -u +%Y%m%dT%H%M%S)}
CNNBENCH=$BUILD/bin/cnnbench
[ -x "$CNNBENCH" ] || { echo "real_vs_synthetic.sh: no $CNNBENCH: build first" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "real_vs_synthetic.sh: no /usr/bin/time (apt-get install time)" >&2; exit 2; }
if [ "$RECORDS" = 1 ]; then DATA=$CORPUS-records; else DATA=$CORPUS; fi
[ -e "$DATA" ] || { echo "real_vs_synthetic.sh: no $DATA: run bench/photo_corpus.sh $CORPUS (and cnnbench-mkrecords for --records) first" >&2; exit 2; }
mkdir -p "$OUT"

common=(--model=resnet50 --batch_size="$BATCH" --num_batches="$STEPS"
        --num_warmup_batches="$WARMUP" --optimizer=momentum --precision="$PRECISION"
        --device=cpu --num_intra_threads=1 --display_every=1)
real=(--data_name=imagenet --data_dir="$DATA" --datasets_num_private_threads=1)
{
  echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC'); load average at start $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "- CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores; runs pinned to cores $CORES"
  echo "- cnnbench commit $(git -C "$REPO" rev-parse --short HEAD), build $BUILD ($(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$BUILD/CMakeCache.txt"))"
  echo "- Command: taskset -c $CORES cnnbench ${common[*]} [${real[*]}]"
  echo "- Real data: $DATA"
} > "$OUT/header.md"
cat "$OUT/header.md"

: > "$OUT/results.csv"
run() {  # run KIND ROUND SLOT
  local kind=$1 log="$OUT/$1-r$2-$3.log" extra=()
  [ "$kind" = real ] && extra=("${real[@]}")
  taskset -c "$CORES" /usr/bin/time -f 'time: %e s wall, %U s user, %S s sys, %P CPU' \
    "$CNNBENCH" "${common[@]}" "${extra[@]}" > "$log" 2>&1 ||
    { echo "FAILED: $kind (see $log)"; tail -5 "$log"; exit 1; }
  local ips cpu
  ips=$(sed -n 's/^total images\/sec: \([0-9.]*\).*/\1/p' "$log")
  cpu=$(sed -n 's/^time: .* \([0-9]*\)% CPU$/\1/p' "$log")
  echo "$kind,$2,$ips,$cpu" >> "$OUT/results.csv"
  printf 'round %d  %-9s %7s images/sec  %4s%% CPU  (load %s)\n' "$2" "$kind" "$ips" "$cpu" "$(cut -d' ' -f1 /proc/loadavg)"
}
for r in $(seq 1 "$ROUNDS"); do
  run synthetic "$r" a; run real "$r" b; run real "$r" c; run synthetic "$r" d
done

awk -F, '{ s[$1] += $3; n[$1]++; c[$1] += $4 }
  END {
    sy = s["synthetic"] / n["synthetic"]; re = s["real"] / n["real"]
    printf "\n| data | images/sec (mean of %d runs) | CPU %% of the run |\n|---|---:|---:|\n", n["real"]
    printf "| synthetic | %.2f | %.0f |\n", sy, c["synthetic"] / n["synthetic"]
    printf "| real (%s) | %.2f | %.0f |\n", "'"$([ "$RECORDS" = 1 ] && echo TFRecords || echo JPEG folder)"'", re, c["real"] / n["real"]
    printf "\nreal / synthetic: %.3f (target >= 0.95)\n", re / sy
  }' "$OUT/results.csv" | tee "$OUT/table.md"
echo "logs: $OUT"
