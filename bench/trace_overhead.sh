#!/usr/bin/env bash
# trace_overhead.sh — what --trace_file costs outside the steps it traces (issue 11: "tracing
# off costs nothing measurable"), and what it costs inside them.
#
# Two runs of the same training, alternated ABBA (--rounds times) so a drift in the
# machine's load falls on both:
#   off     no --trace_file
#   traced  --trace_file with --trace_steps=1: the first timed step is traced (every node
#           synchronized and recorded), the other STEPS-1 steps run with the recorder
#           open but outside its window: the state "tracing off" means mid-run
# For each run, the mean images/sec of steps 2..STEPS comes from the report's cumulative
# means (tf_cnn_benchmarks prints the mean of per-step rates at step 1 and at the last
# step, always): (STEPS * mean_STEPS - mean_1) / (STEPS - 1). Compared between the two
# configurations, that is the cost of the recorder being there but idle (the flag reads
# at each event site), beside the noise between repeats of one configuration. Step 1's
# rate shows the traced step's own cost (per-node synchronization and recording).
# On a loaded machine the runs' spread dwarfs any such difference, so the script also
# measures the idle cost directly (trace_idle_bench: ns per flag read at an event site)
# and states it against the step time, with SITES flag reads a step (about 15 with one
# replica and a few gradient buckets, plus 6 per further replica; --sites overrides).
#
# Usage: bench/trace_overhead.sh [--model=resnet20] [--data_name=cifar10] [--batch=32]
#          [--steps=60] [--warmup=5] [--rounds=3] [--threads=0] [--sites=40] [--out=DIR]
# Env: BUILD (default REPO/build). Results: DIR/summary.txt and every run's output.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$REPO/build}
MODEL=resnet20
DATA=cifar10
BATCH=32
STEPS=60
WARMUP=5
ROUNDS=3
THREADS=0
SITES=40
OUT=""
for arg in "$@"; do
  case "$arg" in
    --model=*) MODEL=${arg#*=} ;;
    --data_name=*) DATA=${arg#*=} ;;
    --batch=*) BATCH=${arg#*=} ;;
    --steps=*) STEPS=${arg#*=} ;;
    --warmup=*) WARMUP=${arg#*=} ;;
    --rounds=*) ROUNDS=${arg#*=} ;;
    --threads=*) THREADS=${arg#*=} ;;
    --sites=*) SITES=${arg#*=} ;;
    --out=*) OUT=${arg#*=} ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "trace_overhead.sh: unknown argument $arg (see --help)" >&2; exit 2 ;;
  esac
done
[ "$STEPS" -ge 3 ] || { echo "trace_overhead.sh: --steps must be >= 3" >&2; exit 2; }
OUT=${OUT:-$BUILD/bench-results/trace-overhead-$(date -u +%Y%m%dT%H%M%S)}
CNNBENCH=$BUILD/bin/cnnbench
[ -x "$CNNBENCH" ] || { echo "trace_overhead.sh: no $CNNBENCH: build first" >&2; exit 2; }
mkdir -p "$OUT"

common=(--model="$MODEL" --data_name="$DATA" --batch_size="$BATCH" --num_batches="$STEPS"
        --num_warmup_batches="$WARMUP" --display_every=100000)
[ "$THREADS" = 0 ] || common+=(--num_intra_threads="$THREADS")

# One run; prints "step1_rate rest_rate" (images/sec).
run() {
  local name=$1; shift
  "$CNNBENCH" "${common[@]}" "$@" > "$OUT/$name.out" 2> "$OUT/$name.err" ||
    { echo "trace_overhead.sh: $name failed: see $OUT/$name.err" >&2; exit 1; }
  awk -v n="$STEPS" '
    $1 == 1 && $2 == "images/sec:" { first = $3 }
    $1 == n && $2 == "images/sec:" { last = $3 }
    END { if (first == "" || last == "") exit 1
          printf "%.2f %.2f\n", first, (n * last - first) / (n - 1) }' "$OUT/$name.out" ||
    { echo "trace_overhead.sh: no step lines in $OUT/$name.out" >&2; exit 1; }
}

echo "model $MODEL ($DATA), batch $BATCH, $WARMUP warm-up + $STEPS timed steps, $ROUNDS ABBA rounds" \
  | tee "$OUT/summary.txt"
echo "commit $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown), $(nproc) cores" \
  | tee -a "$OUT/summary.txt"
: > "$OUT/rates.txt"
for ((r = 1; r <= ROUNDS; r++)); do
  for which in off traced traced off; do
    k=$(( $(grep -c . "$OUT/rates.txt" || true) + 1 ))
    if [ "$which" = off ]; then rates=$(run "off-$k")
    else rates=$(run "traced-$k" --trace_file="$OUT/trace-$k.json" --trace_steps=1); fi
    echo "$which $rates" | tee -a "$OUT/rates.txt"
  done
done

# Per configuration: the mean of the runs' rates and their spread (max - min).
awk '
  { n[$1]++; s1[$1] += $2; s[$1] += $3
    if (!($1 in lo) || $3 < lo[$1]) lo[$1] = $3
    if (!($1 in hi) || $3 > hi[$1]) hi[$1] = $3 }
  END {
    for (c in n) printf "%-6s steps 2..N: %8.2f images/sec (runs spread %.2f, %.1f%%); step 1: %8.2f\n",
      c, s[c] / n[c], hi[c] - lo[c], 100 * (hi[c] - lo[c]) / (s[c] / n[c]), s1[c] / n[c]
    off = s["off"] / n["off"]; tr = s["traced"] / n["traced"]
    printf "recorder open but idle (steps 2..N): %+.2f%% images/sec against off\n", 100 * (tr - off) / off
    printf "the traced step itself: %+.1f%% images/sec against the same step untraced\n",
      100 * (s1["traced"] / n["traced"] - s1["off"] / n["off"]) / (s1["off"] / n["off"])
  }' "$OUT/rates.txt" | tee -a "$OUT/summary.txt"
IDLE=$BUILD/bin/trace_idle_bench
if [ -x "$IDLE" ]; then
  line=$("$IDLE" 2>/dev/null | head -1)
  echo "$line" | tee -a "$OUT/summary.txt"
  ns=$(echo "$line" | awk '{print $2}')
  awk -v ns="$ns" -v sites="$SITES" -v batch="$BATCH" '
    $1 == "off" { n++; s += $3 }
    END { step_us = 1e6 * batch / (s / n)
          printf "idle cost: %d sites x %.2f ns = %.3f us a step, %.1e of the %.0f us step\n",
            sites, ns, sites * ns / 1000, sites * ns / 1000 / step_us, step_us }' \
    "$OUT/rates.txt" | tee -a "$OUT/summary.txt"
else
  echo "(no $IDLE: build the trace_idle_bench target for the direct idle cost)"
fi
echo "results in $OUT"
