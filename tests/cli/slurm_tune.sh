#!/usr/bin/env bash
# slurm_tune.sh — cnnbench-tune inside a Slurm allocation, against a real slurmctld and
# slurmd (tests/support/slurm_cluster.sh), on the fixture_tune device (a known step time):
# - run under `salloc -n2` (SLURM_JOB_ID set, not a job step), it says it runs each
#   configuration as a job step, and every child's command is `srun --ntasks P ...`, with
#   --mpi=pmix for the 2-process layout, which trains over 2 ranks;
# - the same search outside an allocation launches with mpirun, as before (tests/cli/tune.sh).
# Skips (77, saying why) where Slurm cannot run: not root, slurm-wlm not installed, its
# daemons failing to start, or no pmix plugin in this Slurm.
set -uo pipefail
: "${CNNBENCH_TUNE:?}" "${CNNB_BUILD_DIR:?}" "${CNNB_SOURCE_DIR:?}"
source "$CNNB_SOURCE_DIR/tests/support/mpi.sh"
source "$CNNB_SOURCE_DIR/tests/support/slurm_cluster.sh"
mpi_require replicated
slurm_require
fail() {
  echo "FAIL: $*"
  slurm_logs
  exit 1
}
slurm_up
work=$(mktemp -d)
trap 'slurm_down; rm -rf "$work"' EXIT
slurm_mpi_pmix "$work/mpi_list"
export CNNB_PLUGIN_PATH="$CNNB_BUILD_DIR/fixtures/tune" OMP_WAIT_POLICY=passive

cat >"$work/space" <<'SPACE'
variable_update = replicated
precision = fp32
data_name := cifar10
image_size := 8
num_intra_threads = 1
SPACE
out="$work/tuned"
timeout -s KILL 300 salloc --ntasks=2 "$CNNBENCH_TUNE" --models=trivial --device=fixture_tune \
  --min_batch_size=32 --max_batch_size=32 --num_devices=2 --processes=auto \
  --space="$work/space" --budget=60s --out="$out" >"$work/tune.out" 2>"$work/tune.err"
rc=$?
[ "$rc" -eq 0 ] || fail "salloc -n2 cnnbench-tune: exit $rc: $(tail -5 "$work/tune.err")"
grep -qE '^cnnbench-tune: inside Slurm job [0-9]+: each configuration runs as a job step' \
  "$work/tune.err" || fail "not told it launches job steps: $(head -5 "$work/tune.err")"
results="$out/results.jsonl"
[ -s "$results" ] || fail "no results: $(ls "$out")"
srun_path=$(command -v srun)
n_all=$(grep -c '"command"' "$results")
n_srun=$(grep -c "\"command\":\"$srun_path --ntasks [12] --kill-on-bad-exit=1 " "$results")
[ "$n_all" -gt 0 ] && [ "$n_srun" -eq "$n_all" ] \
  || fail "$n_srun of $n_all children launched with srun: $(grep -o '"command":"[^"]*' "$results" | head -3)"
grep -q "\"command\":\"$srun_path --ntasks 2 --kill-on-bad-exit=1 --mpi=pmix " "$results" \
  || fail "no 2-process layout launched with srun --mpi=pmix"
grep -q '^| trivial | replicated | 2x1 \|^| trivial | replicated | 1x2 ' "$out/report.md" \
  || fail "no winner row: $(grep trivial "$out/report.md" | head -3)"
echo "ok: cnnbench-tune in an allocation: $n_all children, each a job step (srun --ntasks P), the 2-process layout over --mpi=pmix"
echo PASS
