#!/usr/bin/env bash
# scaling.sh — issue 8's weak-scaling benchmark: how much of a second worker's compute
# each distribution strategy keeps, on this machine.
#
# ResNet-50 (synthetic data, momentum SGD, fp32) at a per-replica batch of --batch, each
# worker with one compute thread, weak scaling (the batch is per replica, as
# tf_cnn_benchmarks). For every strategy whose plugin is built (independent, replicated,
# parameter_server, horovod; the others are listed as not built), 2 workers run
#   - in one process: --num_gpus=2 (the host runs the replicas one after another, so the
#     process gets one thread per replica: --num_intra_threads=2);
#   - as 2 MPI ranks on this host: shared memory and loopback TCP (tests/support/mpi.sh);
#   - as 2 MPI ranks on 2 "hosts": network namespaces whose links are shaped to each
#     --rates value with tc (tests/support/netns.sh; needs root, else those rows are
#     skipped, saying why).
# Efficiency = (images/sec with 2 workers) / (2 x images/sec with 1), where "1" is one
# process, one replica, one thread, --variable_update=independent: the compute ceiling,
# as Horovod measures against plain single-GPU training. A report under MPI counts every
# rank's images (over the slowest rank's time, as the host aggregates them); independent
# ranks are separate worlds that each report, and their reports are summed.
#
# Beside the runs, `allreduce_bench mpi` (MPI_Allreduce, 4 KiB to --allreduce-max) runs over
# each link, for bench/scaling_model.py --validate (the alpha-beta model against these
# links). For the netns rows the table also gives the bytes the shapers carried per step.
#
# Usage: bench/scaling.sh [--build=DIR] [--model=resnet50] [--batch=8] [--warmup=2]
#                         [--steps=5] [--repeat=1]
#                         [--strategies="independent replicated parameter_server horovod"]
#                         [--placements="inprocess ranks netns"] [--rates="1gbit 10gbit"]
#                         [--allreduce-max=268435456] [--no-allreduce] [--out=DIR]
# At batch 8 a ResNet-50 step on one thread takes about 2 s: each run (2 warm-up + 5
# timed steps, plus set-up) about 30 s, all of them 6-12 minutes on a 2-core machine.
# --repeat=N runs each configuration N times and keeps the fastest (on a machine others
# share, the run that had the cores to itself), the reference included. Logs and
# summary.md land in --out (default $BUILD/bench-results/scaling-...). The build is
# brought up to date first (NO_BUILD=1 in the environment skips that).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${CNNB_BUILD:-$REPO/build-bench}
MODEL=resnet50 BATCH=8 WARMUP=2 STEPS=5 REPEAT=1 OUT="" ALLREDUCE=1 ALLREDUCE_MAX=268435456
STRATEGIES="independent replicated parameter_server horovod"
PLACEMENTS="inprocess ranks netns" RATES="1gbit 10gbit"
for a in "$@"; do
  case "$a" in
    --build=*) BUILD=${a#*=} ;;
    --model=*) MODEL=${a#*=} ;;
    --batch=*) BATCH=${a#*=} ;;
    --warmup=*) WARMUP=${a#*=} ;;
    --steps=*) STEPS=${a#*=} ;;
    --repeat=*) REPEAT=${a#*=} ;;
    --strategies=*) STRATEGIES=${a#*=} ;;
    --placements=*) PLACEMENTS=${a#*=} ;;
    --rates=*) RATES=${a#*=} ;;
    --allreduce-max=*) ALLREDUCE_MAX=${a#*=} ;;
    --no-allreduce) ALLREDUCE=0 ;;
    --out=*) OUT=${a#*=} ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "scaling.sh: unknown argument '$a' (see --help)" >&2; exit 2 ;;
  esac
done
for p in $PLACEMENTS; do
  case "$p" in inprocess|ranks|netns) ;; *)
    echo "scaling.sh: --placements: unknown '$p' (known: inprocess ranks netns)" >&2; exit 2 ;;
  esac
done
BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || { echo "scaling.sh: no build directory" >&2; exit 2; }
source "$REPO/bench/lib.sh"
source "$REPO/tests/support/mpi.sh"
source "$REPO/tests/support/netns.sh"
bench_prepare
PLUGINS="$BUILD/lib/cnnbench/plugins"
ALLREDUCE_BIN="$BUILD/bin/allreduce_bench"
OUT=${OUT:-$BUILD/bench-results/scaling-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
START=$(date +%s)
# Ranks wait in MPI with yield on: 2 ranks and their communication threads share 2
# cores, and a rank polling without yielding holds a core its peer needs (netns.sh's
# flags say the same for the namespaced hosts).
MPI_EXTRA=(--mca mpi_yield_when_idle 1)
# Each rank runs under /usr/bin/time, which prints its own share of the CPU: mpirun's
# daemons on the namespaced hosts detach, so time around mpirun does not see the ranks.
RANK_TIME=("$TIME" -f "rank CPU %P")

present=() missing=()
for s in $STRATEGIES; do
  if [ -e "$PLUGINS/libcnnb_strategy_$s.so" ]; then present+=("$s"); else missing+=("$s"); fi
done

netns_ok=0 netns_why=""
if [[ " $PLACEMENTS " == *" netns "* ]]; then
  if netns_why=$( (netns_require) 2>&1 ); then netns_ok=1; else netns_why=${netns_why#SKIP: }; fi
fi

{
  echo "## Weak scaling, 1 vs 2 workers: $MODEL, batch $BATCH per replica, 1 thread per worker ($(date -u '+%Y-%m-%d %H:%M UTC'))"
  echo
  machine_info
  echo "- OpenMPI: $(mpirun --version 2>/dev/null | head -1)"
  echo "- Steps: $WARMUP warm-up + $STEPS timed per run, the fastest of $REPEAT run(s) per row; fp32, momentum SGD, synthetic data"
  echo "- Strategies built: ${present[*]:-none}${missing[*]:+; not built (skipped): ${missing[*]}}"
  [ "$netns_ok" = 1 ] || [[ " $PLACEMENTS " != *" netns "* ]] || echo "- Namespaced hosts skipped: $netns_why"
} > "$OUT/header.md"
cat "$OUT/header.md"

common=(--model="$MODEL" --batch_size="$BATCH" --num_batches="$STEPS" --num_warmup_batches="$WARMUP"
        --optimizer=momentum --device=cpu --display_every=1)

# Results by key: images/sec (IPS), our CPU share (CPU), the whole machine's (BUSY), a
# note (NOTE), bytes per step over the shaped links (BPS).
declare -A IPS CPU BUSY NOTE BPS
ROWS=()
# Busy jiffies and all jiffies of the whole machine (every process, ours or not).
machine_ticks() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' /proc/stat; }
# measure KEY LOG CMD...: runs CMD --repeat times under /usr/bin/time -v (LOG.1, LOG.2,
# ...) and keeps the fastest run: the sum of its reports' total images/sec (one report
# per world), its CPU share (the ranks' own "rank CPU" lines when there are some, else
# /usr/bin/time's), how busy the machine was meanwhile (100 per core), the bytes per step
# the shapers carried (namespaced runs), or why the runs failed.
measure() {
  local key=$1 log=$2 r t0 t1 ips busy cpu bytes sent_before=0; shift 2
  ROWS+=("$key")
  for ((r = 1; r <= REPEAT; r++)); do
    echo "$*" > "$log.$r"
    read -r -a t0 < <(machine_ticks)
    [[ $key == */netns-* ]] && sent_before=$(netns_sent_bytes)
    ips=""
    if "$TIME" -v "$@" >> "$log.$r" 2>&1; then
      ips=$(awk '/total images\/sec:/ {s += $3; n++} END {if (n) printf "%.2f", s}' "$log.$r")
      [ -n "$ips" ] || NOTE[$key]="no report in the log"
    else
      NOTE[$key]="failed: $(grep -m1 -iE 'error|refus|not supported|unknown' "$log.$r" | cut -c1-140)"
    fi
    read -r -a t1 < <(machine_ticks)
    busy=$(awk -v b=$((t1[0] - t0[0])) -v a=$((t1[1] - t0[1])) -v n="$(nproc --all)" \
      'BEGIN { if (a > 0) printf "%.0f", 100 * n * b / a }')
    cpu=$(awk '/^rank CPU [0-9]+%/ {s += $3; n++} END {if (n) print s}' "$log.$r")
    [ -n "$cpu" ] || cpu=$(cpu_pct "$log.$r")
    # Each byte passes two shapers (out of one host, into the other).
    [[ $key == */netns-* ]] && bytes=$(awk -v b=$(( $(netns_sent_bytes) - sent_before )) \
      -v n=$((WARMUP + STEPS)) 'BEGIN { printf "%.1f", b / 2 / n / 1e6 }')
    echo "   run $r: ${ips:-${NOTE[$key]:-}}; CPU ${cpu:-?}% (machine ${busy:-?}%)"
    if [ -n "$ips" ] && awk -v a="$ips" -v b="${IPS[$key]:-0}" 'BEGIN { exit !(a > b) }'; then
      IPS[$key]=$ips CPU[$key]=$cpu BUSY[$key]=$busy BPS[$key]=${bytes:-}
      unset "NOTE[$key]"
    elif [ -z "${IPS[$key]:-}" ]; then
      CPU[$key]=$cpu BUSY[$key]=$busy
    fi
  done
}

echo "== baseline: 1 process, 1 replica, independent"
measure "baseline" "$OUT/baseline.log" env OMP_NUM_THREADS=1 "$CNNBENCH" "${common[@]}" \
  --num_intra_threads=1 --variable_update=independent

for s in "${present[@]}"; do
  if [[ " $PLACEMENTS " == *" inprocess "* ]]; then
    echo "== $s: 1 process x 2 replicas"
    measure "$s/inprocess" "$OUT/$s-inprocess.log" env OMP_NUM_THREADS=2 "$CNNBENCH" \
      "${common[@]}" --num_gpus=2 --num_intra_threads=2 --variable_update="$s"
  fi
  if [[ " $PLACEMENTS " == *" ranks "* ]]; then
    echo "== $s: 2 ranks on this host"
    measure "$s/ranks" "$OUT/$s-ranks.log" env OMP_NUM_THREADS=1 timeout -s KILL 900 \
      mpirun "${MPI_FLAGS[@]}" "${MPI_EXTRA[@]}" -np 2 "${RANK_TIME[@]}" "$CNNBENCH" "${common[@]}" \
      --num_intra_threads=1 --variable_update="$s"
  fi
done

# The MPI_Allreduce sweeps: loopback first, then each shaped link.
allreduce_sweep() { # allreduce_sweep LABEL LAUNCH...
  local label=$1; shift
  [ "$ALLREDUCE" = 1 ] && [ -x "$ALLREDUCE_BIN" ] || return 0
  echo "== MPI_Allreduce over $label"
  "$@" "$ALLREDUCE_BIN" mpi --min_bytes=4096 --max_bytes="$ALLREDUCE_MAX" \
    > "$OUT/allreduce-$label.txt" 2>&1 || echo "   (failed: see $OUT/allreduce-$label.txt)"
  tail -n 4 "$OUT/allreduce-$label.txt"
}
if [[ " $PLACEMENTS " == *" ranks "* ]]; then
  allreduce_sweep loopback timeout -s KILL 900 mpirun "${MPI_FLAGS[@]}" "${MPI_EXTRA[@]}" -np 2
fi

if [ "$netns_ok" = 1 ]; then
  first_rate=${RATES%% *}
  netns_up 2 "$first_rate" || die "cannot build the namespaced hosts"
  for rate in $RATES; do
    netns_shape "$rate" || die "cannot shape the links at $rate"
    for s in "${present[@]}"; do
      echo "== $s: 2 ranks on 2 namespaced hosts, links at $rate"
      netns_mpirun_argv 2
      measure "$s/netns-$rate" "$OUT/$s-netns-$rate.log" env OMP_NUM_THREADS=1 timeout -s KILL 900 \
        "${NETNS_MPIRUN_ARGV[@]}" "${RANK_TIME[@]}" "$CNNBENCH" "${common[@]}" \
        --num_intra_threads=1 --variable_update="$s"
    done
    allreduce_sweep "netns-$rate" netns_mpirun_bounded 900 2
    netns_qdiscs > "$OUT/qdiscs-$rate.txt"
  done
  netns_down
fi

# --- the table ----------------------------------------------------------------------
label() {
  case "$1" in
    baseline) echo "1 process x 1 replica (independent): the reference" ;;
    */inprocess) echo "1 process x 2 replicas (--num_gpus=2, 2 threads)" ;;
    */ranks) echo "2 ranks, this host (shared memory + loopback TCP)" ;;
    */netns-*) echo "2 ranks, 2 namespaced hosts, links at ${1#*/netns-}" ;;
  esac
}
{
  cat "$OUT/header.md"
  echo
  echo "| strategy | workers | images/sec | efficiency | MB/step over the links | CPU % (run) | CPU % (machine) | note |"
  echo "|---|---|---:|---:|---:|---:|---:|---|"
  base=${IPS[baseline]:-}
  for key in "${ROWS[@]}"; do
    s=${key%%/*}; [ "$key" = baseline ] && s=independent
    eff="-"
    if [ -n "${IPS[$key]:-}" ] && [ -n "$base" ] && [ "$key" != baseline ]; then
      eff="$(calc "100 * ${IPS[$key]} / (2 * $base)" 0)%"
    fi
    echo "| $s | $(label "$key") | ${IPS[$key]:--} | $eff | ${BPS[$key]:--} | ${CPU[$key]:--} | ${BUSY[$key]:--} | ${NOTE[$key]:-} |"
  done
  for s in "${missing[@]}"; do echo "| $s | (plugin not built) | - | - | - | - | - | not measured |"; done
  echo
  echo "Efficiency = images/sec with 2 workers / (2 x the reference's images/sec). CPU % (run):"
  echo "the run's share of the CPU (the sum of its ranks' own, from /usr/bin/time); CPU %"
  echo "(machine): how busy the whole machine was meanwhile, every process counted; both 100"
  echo "per core, this machine has $(nproc --all). When the machine is busier than the run, other"
  echo "work took cores from it and the figure is too low. MB/step: bytes the shapers carried"
  echo "per step (warm-up and timed steps; each byte counted once)."
  if [ "$ALLREDUCE" = 1 ] && [ -x "$ALLREDUCE_BIN" ]; then
    echo
    echo "MPI_Allreduce (2 ranks) over each link, large sizes (full sweeps in allreduce-*.txt):"
    echo
    echo '```'
    for f in "$OUT"/allreduce-*.txt; do
      [ -e "$f" ] || continue
      echo "$(basename "$f" .txt | sed 's/^allreduce-//'):"
      grep -E '^ +[0-9]' "$f" | tail -n 3 | awk '{printf "  %10s B  %10s us  busbw %s GB/s\n", $1, $5, $7}'
    done
    echo '```'
    if command -v python3 >/dev/null; then
      echo
      step=()
      [ -n "$base" ] && step=(--step-s="$(calc "$BATCH / $base" 3)" --model="$MODEL")
      python3 "$REPO/bench/scaling_model.py" --validate "${step[@]}" "$OUT"/allreduce-*.txt 2>&1 || true
    fi
  fi
  echo
  echo "Run time: $(( $(date +%s) - START )) s; load average at end: $(cut -d" " -f1-3 /proc/loadavg). Logs: $OUT"
} > "$OUT/summary.md"
echo
cat "$OUT/summary.md"
