#!/usr/bin/env bash
# tune_vs_grid.sh — is cnnbench-tune's winner as good as the best of the exhaustive grid
# over the same space? (issue 21)
#
#   bench/tune_vs_grid.sh [--models=resnet20,alexnet] [--budget=10m] [--num_devices=2]
#                         [--device=cpu] [--space=FILE] [--grid_steps=N] [--out=DIR]
#                         [--reuse_grid=DIR] [--grid_models=LIST]
#
# 1. cnnbench-tune searches within --budget (its own flags as given), into DIR/tune.
# 2. The grid: every candidate the tuner searched (DIR/tune/<model>.candidates, one
#    command a line, written by the tuner after its probes) runs as cnnbench for
#    --grid_steps timed steps (default 40, after 5 warm-up), each with its own
#    --benchmark_log_dir; its figure is the log summary's images_per_sec, the
#    `total images/sec` cnnbench reports.
# 3. Per model: the grid's best beside the grid's own measurement of the tuner's winner
#    (same length, same method), their ratio, and PASS when the winner is within 5% of
#    the best. DIR/tune_vs_grid.md holds the table, the times of both, the machine and
#    the commit.
# --reuse_grid=DIR takes a candidate's grid figure from an earlier call's DIR/grid/<model>.tsv
# when it holds that command (the grid measures the space, whatever the tuner does with
# it: a changed tuner, or a second call, is compared without measuring the grid again);
# the table says how many were reused. Only on the same machine, the same session.
# --grid_models=LIST runs the grid for those of --models only (the tuner still searches
# them all, in one budget): the others' rows say so and give no verdict.
# A grid failure (refused, out of memory) is listed and skipped, as the tuner does.
# Exit status: 0 every model PASS; 1 a model outside 5% (or nothing to compare); 2 bad
# usage.
set -uo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$REPO/build}
models=resnet20,alexnet budget=10m devices=2 device=cpu space="" steps=40 warmup=5
out="" reuse="" grid_models=""
extra=()
for arg in "$@"; do
  case "$arg" in
    --models=*) models=${arg#*=} ;;
    --budget=*) budget=${arg#*=} ;;
    --num_devices=*) devices=${arg#*=} ;;
    --device=*) device=${arg#*=} ;;
    --space=*) space=${arg#*=} ;;
    --grid_steps=*) steps=${arg#*=} ;;
    --out=*) out=${arg#*=} ;;
    --processes=* | --min_batch_size=* | --max_batch_size=* | --first_steps=* | --ceilings=*)
      extra+=("$arg") ;;
    --reuse_grid=*) reuse=${arg#*=} ;;
    --grid_models=*) grid_models=${arg#*=} ;;
    -h | --help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "tune_vs_grid.sh: unknown argument $arg (--help)" >&2; exit 2 ;;
  esac
done
CNNBENCH=$BUILD/bin/cnnbench
TUNE=$BUILD/bin/cnnbench-tune
[ -x "$CNNBENCH" ] && [ -x "$TUNE" ] ||
  { echo "tune_vs_grid.sh: no $CNNBENCH or $TUNE: build first (BUILD=$BUILD)" >&2; exit 2; }
[[ "$steps" =~ ^[0-9]+$ ]] && ((steps >= 2)) || { echo "tune_vs_grid.sh: --grid_steps=$steps" >&2; exit 2; }
out=${out:-$REPO/bench/results/tune_vs_grid-$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$out" || exit 2
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1}
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}

# ---- 1. the tuner ---------------------------------------------------------------------
tune_args=(--models="$models" --device="$device" --budget="$budget" --num_devices="$devices"
           --out="$out/tune" "${extra[@]}")
[ -n "$space" ] && tune_args+=(--space="$space")
echo "== cnnbench-tune ${tune_args[*]}"
t0=$(date +%s.%N)
"$TUNE" "${tune_args[@]}" 2> "$out/tune.log"
tune_rc=$?
t1=$(date +%s.%N)
tail -4 "$out/tune.log" >&2
((tune_rc == 0)) || { echo "tune_vs_grid.sh: cnnbench-tune exited $tune_rc (see $out/tune.log)" >&2; exit 1; }

# ---- 2. the grid ----------------------------------------------------------------------
# run_key KEY DIR: runs one candidate's command for the grid's length; prints its
# images/sec, or "failed: first error line".
run_key() {
  local key=$1 dir=$2 cmd
  read -ra cmd <<< "$key"
  if [ "${cmd[0]}" = mpirun ]; then
    cmd=(mpirun "${cmd[1]}" "${cmd[2]}" "$CNNBENCH" "${cmd[@]:3}")
  else
    cmd=("$CNNBENCH" "${cmd[@]}")
  fi
  mkdir -p "$dir"
  "${cmd[@]}" --num_batches="$steps" --num_warmup_batches="$warmup" --display_every=10 \
    --benchmark_log_dir="$dir" > "$dir/stdout.txt" 2> "$dir/stderr.txt"
  local ips
  ips=$(sed -n 's/.*"record":"summary".*"status":"ok".*"images_per_sec":\([0-9.eE+-]*\).*/\1/p' \
    "$dir/benchmark_run.rank0.jsonl" 2>/dev/null | tail -1)
  if [ -n "$ips" ]; then awk -v v="$ips" 'BEGIN { printf "%.1f\n", v }'; else echo "failed: $(grep -m1 error "$dir/stderr.txt")"; fi
}

table="$out/tune_vs_grid.md"
verdicts=0 passes=0
g0=$(date +%s.%N)
{
  echo "# cnnbench-tune against the exhaustive grid"
  echo
  echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(hostname), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg);"
  echo "commit \`$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo ?)\`; device \`$device\`, $devices devices;"
  echo "tuner: \`cnnbench-tune ${tune_args[*]}\`; grid: every candidate, $steps timed steps after $warmup warm-up."
  echo
} > "$table"
IFS=, read -ra model_list <<< "$models"
rows=()
for model in "${model_list[@]}"; do
  if [ -n "$grid_models" ] && [[ ",$grid_models," != *",$model,"* ]]; then
    rows+=("| $model | \`$(grep -v '^#' "$out/tune/$model.flags" 2>/dev/null | paste -sd' ')\` | | grid not run (--grid_models=$grid_models) | | | |")
    continue
  fi
  list="$out/tune/$model.candidates"
  flags="$out/tune/$model.flags"
  [ -f "$list" ] && [ -f "$flags" ] || { rows+=("| $model | no winner or no candidate list from the tuner | | | | | FAIL |"); verdicts=$((verdicts + 1)); continue; }
  # The winner's command as the candidate list spells it.
  winner=$(grep -v '^#' "$flags" | paste -sd' ')
  np=$(sed -n 's/^# Run: mpirun -np \([0-9]*\) .*/\1/p' "$flags")
  [ -n "$np" ] && winner="mpirun -np $np $winner"
  best="" best_ips=0 winner_ips="" n=0 failed=0 reused=0
  while IFS= read -r key; do
    n=$((n + 1))
    r=""
    [ -n "$reuse" ] && [ -f "$reuse/grid/$model.tsv" ] &&
      r=$(awk -F'\t' -v k="$key" '$2 == k { print $1; exit }' "$reuse/grid/$model.tsv")
    if [ -n "$r" ]; then reused=$((reused + 1)); else
      r=$(run_key "$key" "$out/grid/$model/$n" < /dev/null) # mpirun would read the list
    fi
    printf '%s\t%s\n' "$r" "$key" >> "$out/grid/$model.tsv"
    echo "   $model $n: $r  ($key)" >&2
    case "$r" in failed:*) failed=$((failed + 1)); continue ;; esac
    [ "$key" = "$winner" ] && winner_ips=$r
    if awk -v a="$r" -v b="$best_ips" 'BEGIN { exit !(a > b) }'; then best=$key best_ips=$r; fi
  done < "$list"
  verdicts=$((verdicts + 1))
  if [ -z "$winner_ips" ] || [ -z "$best" ]; then
    rows+=("| $model | \`$winner\` | ${winner_ips:-not in the grid or failed} | \`$best\` | $best_ips | | FAIL |")
    continue
  fi
  ratio=$(awk -v a="$winner_ips" -v b="$best_ips" 'BEGIN { printf "%.3f", a / b }')
  verdict=FAIL
  awk -v r="$ratio" 'BEGIN { exit !(r >= 0.95) }' && verdict=PASS && passes=$((passes + 1))
  rows+=("| $model | \`$winner\` | $winner_ips | \`$best\` | $best_ips | $ratio | $verdict ($n candidates, $failed failed${reuse:+, $reused from $reuse}) |")
done
g1=$(date +%s.%N)
{
  echo "| model | tuner's winner | its images/sec in the grid | grid's best | images/sec | winner / best | within 5% |"
  echo "|---|---|---:|---|---:|---:|---|"
  printf '%s\n' "${rows[@]}"
  echo
  awk -v a="$t0" -v b="$t1" -v c="$g0" -v d="$g1" \
    'BEGIN { printf "Time: the tuner %.0f s, the grid %.0f s.\n", b - a, d - c }'
  echo
  echo "The tuner's own report: \`tune/report.md\`; each grid run: \`grid/<model>.tsv\`."
} >> "$table"
cat "$table"
((verdicts > 0 && passes == verdicts))
