#!/usr/bin/env bash
# cnnbench launched by a real Slurm's srun (issue 35): slurmctld and one slurmd on this
# machine's loopback (tests/support/slurm_cluster.sh), 2 tasks on its one node.
# - `srun -n2 --mpi=pmix cnnbench --model=lenet --variable_update=horovod` (synthetic data)
#   trains as one job of 2 ranks: exit 0, one report (rank 0's) whose global batch is both
#   ranks' (8 = 2 x 4) and whose total says "2 ranks", and rank 1's log lines tagged
#   [rank 1] ("horovod: rank 1 of 2");
# - horovod, parameter_server and replicated under srun --mpi=pmix reach the parameters
#   1 process of the whole batch reaches (the `sequence` fixture's data; tolerances as
#   strategy_horovod.sh, strategy_ps_mpi.sh, strategy_replicated.sh), on both ranks alike:
#   a task training alone (a world of one) would differ by ~3e-2;
# - --mpi=pmi2 the same, where this Slurm offers it and this OpenMPI has a PMI-2 client
#   (OpenMPI's pmix "s2" component); otherwise it says which is missing and skips that part
#   (Debian 12's OpenMPI 4.1 has none: direct launch there is PMIx only);
# - `srun -n2 --mpi=none` (no PMI, Slurm's default MpiDefault) with an MPI strategy is
#   refused before any training, by every task, with a message that says to use
#   srun --mpi=pmix, and srun exits 2 (cnnbench's status for a refused configuration);
#   one task with --mpi=none trains as a world of one; 2 tasks with --mpi=none and
#   --variable_update=independent each train alone, told so, their files named by
#   SLURM_PROCID of SLURM_STEP_NUM_TASKS and the job (benchmark_run.job<ID>.rank0 and
#   .rank1.jsonl).
# Skips (77, saying why) where Slurm cannot run: not root, slurm-wlm not installed, its
# daemons failing to start, or no pmix plugin in this Slurm.
set -uo pipefail
: "${CNNBENCH:?}" "${TRAIN_PARAMS:?}" "${PARAMS_COMPARE:?}" "${CNNB_BUILD_DIR:?}" "${CNNB_SOURCE_DIR:?}"
source "$CNNB_SOURCE_DIR/tests/support/mpi.sh"
source "$CNNB_SOURCE_DIR/tests/support/slurm_cluster.sh"
mpi_require horovod parameter_server replicated
slurm_require
fail() {
  echo "FAIL: $*"
  slurm_logs
  exit 1
}
slurm_up
work=$(mktemp -d)
trap 'slurm_down; rm -rf "$work"' EXIT
# The tasks are started by slurmd with srun's environment: slurm_mpi_pmix's OpenMPI
# settings and, under the sanitizers, mpi.sh's LSAN_OPTIONS (leaks are checked in them).
slurm_mpi_pmix "$work/mpi_list"

# step NAME ARGS...: srun ARGS (bounded: a hung step fails the test instead of holding
# CI); stdout to NAME.out, stderr to NAME.err, srun's status in $rc.
step() {
  local name=$1
  shift
  timeout -s KILL 180 srun --kill-on-bad-exit=1 "$@" >"$work/$name.out" 2>"$work/$name.err"
  rc=$?
}
show() { cat "$work/$1.out" "$work/$1.err"; }

# ---- the issue's command: srun -n2 --mpi=pmix cnnbench ... --variable_update=horovod ----
small=(--model=lenet --batch_size=4 --num_batches=4 --num_warmup_batches=0 --num_intra_threads=1)
step hvd -n2 --mpi=pmix "$CNNBENCH" "${small[@]}" --variable_update=horovod
[ "$rc" -eq 0 ] || fail "srun -n2 --mpi=pmix horovod: exit $rc: $(show hvd)"
[ "$(grep -c '^total images/sec: ' "$work/hvd.out")" -eq 1 ] || fail "not one report: $(show hvd)"
grep -q '^total images/sec: [0-9.]* (2 ranks: ' "$work/hvd.out" || fail "the total is not over 2 ranks: $(show hvd)"
[ "$(grep -c '^Model:' "$work/hvd.out")" -eq 1 ] || fail "the report's header printed more than once: $(show hvd)"
grep -q '^Batch size:  8 global$' "$work/hvd.out" || fail "the global batch is not 2 x 4: $(show hvd)"
grep -q '^horovod: rank 1 of 2;' "$work/hvd.err" || fail "no 'horovod: rank 1 of 2': $(show hvd)"
grep -q '^\[rank 1\] cnnbench: ' "$work/hvd.err" || fail "no [rank 1] log lines: $(show hvd)"
echo "ok: srun -n2 --mpi=pmix cnnbench --variable_update=horovod: one job of 2 ranks, one report"

# ---- the three MPI strategies: 2 ranks x batch 2 = 1 process x batch 4 ------------------
export CNNB_PLUGIN_PATH=$CNNB_BUILD_DIR/fixtures/data
seq_args=(--model=lenet --datasource=sequence --num_intra_threads=1 --num_warmup_batches=0
          --num_batches=4 --optimizer=momentum --init_learning_rate=0.01 --collective_timeout_s=60)
CNNB_PARAMS_OUT=$work/ref "$TRAIN_PARAMS" "${seq_args[@]}" --batch_size=4 >"$work/ref.out" 2>"$work/ref.err" \
  || fail "1 process of batch 4: $(show ref)"
CNNB_PARAMS_OUT=$work/alone "$TRAIN_PARAMS" "${seq_args[@]}" --batch_size=2 >"$work/alone.out" 2>"$work/alone.err" \
  || fail "1 process of batch 2: $(show alone)"
# joined NAME TOL: both ranks' parameters within TOL of 1 process x batch 4, equal to each
# other, and one report of 2 ranks.
joined() {
  local name=$1 tol=$2
  [ -e "$work/$name.0.0" ] && [ -e "$work/$name.1.0" ] || fail "$name: not both ranks wrote parameters: $(show "$name")"
  "$PARAMS_COMPARE" "$tol" "$work/ref.0.0" "$work/$name.0.0" "$work/$name.1.0" \
    || fail "$name: the parameters differ from 1 process x batch 4"
  "$PARAMS_COMPARE" 0 "$work/$name.0.0" "$work/$name.1.0" >/dev/null || fail "$name: the ranks' parameters differ"
  [ "$(grep -c '^total images/sec: [0-9.]* (2 ranks: ' "$work/$name.out")" -eq 1 ] \
    || fail "$name: not one report over 2 ranks: $(show "$name")"
}
# Tolerances (fp32 sums reassociated): horovod 1e-6 as strategy_horovod.sh, the others
# 1e-5 as strategy_ps_mpi.sh and strategy_replicated.sh. A rank training alone on its
# half of the batch is ~3e-2 away (checked: the comparison can fail).
! "$PARAMS_COMPARE" 1e-5 "$work/ref.0.0" "$work/alone.0.0" >/dev/null 2>&1 \
  || fail "1 process of batch 2 matches 1 process of batch 4: the comparison proves nothing"
for s in horovod:1e-6 parameter_server:1e-5 replicated:1e-5; do
  name=pmix_${s%%:*}
  CNNB_PARAMS_OUT=$work/$name step "$name" -n2 --mpi=pmix "$TRAIN_PARAMS" "${seq_args[@]}" --batch_size=2 \
    --variable_update="${s%%:*}"
  [ "$rc" -eq 0 ] || fail "srun -n2 --mpi=pmix ${s%%:*}: exit $rc: $(show "$name")"
  joined "$name" "${s#*:}"
  echo "ok: srun -n2 --mpi=pmix --variable_update=${s%%:*}: 2 ranks x batch 2 = 1 process x batch 4"
done

# ---- --mpi=pmi2, where both sides can speak it --------------------------------------------
if ! grep -qw pmi2 "$work/mpi_list"; then
  echo "skipped: srun --mpi=pmi2 (this Slurm's srun --mpi=list has no pmi2)"
elif ! command -v ompi_info >/dev/null 2>&1; then
  echo "skipped: srun --mpi=pmi2 (no ompi_info to ask whether OpenMPI has a PMI-2 client)"
elif ! ompi_info --parsable 2>/dev/null | grep -q '^mca:pmix:s2:'; then
  echo "skipped: srun --mpi=pmi2 (this OpenMPI has no PMI-2 client: ompi_info lists no pmix s2" \
    "component, it was built without --with-pmi; direct launch here is srun --mpi=pmix)"
else
  CNNB_PARAMS_OUT=$work/pmi2 step pmi2 -n2 --mpi=pmi2 "$TRAIN_PARAMS" "${seq_args[@]}" --batch_size=2 \
    --variable_update=horovod
  [ "$rc" -eq 0 ] || fail "srun -n2 --mpi=pmi2 horovod: exit $rc: $(show pmi2)"
  joined pmi2 1e-6
  echo "ok: srun -n2 --mpi=pmi2 --variable_update=horovod: 2 ranks x batch 2 = 1 process x batch 4"
fi

# ---- --mpi=none: 2 tasks cannot join, refused; 1 task is a world of one --------------------
for s in horovod replicated; do
  name=none_$s
  step "$name" -n2 --mpi=none "$CNNBENCH" "${small[@]}" --variable_update=$s
  [ "$rc" -eq 2 ] || fail "srun -n2 --mpi=none $s: exit $rc, not 2: $(show "$name")"
  n=$(grep -c "^cnnbench: error: .*srun started 2 tasks (SLURM_STEP_NUM_TASKS) without a PMI, .*run srun --mpi=pmix" \
    "$work/$name.err")
  [ "$n" -eq 2 ] || fail "srun -n2 --mpi=none $s: $n tasks said why, not 2: $(show "$name")"
  ! grep -q '^total images/sec' "$work/$name.out" || fail "srun -n2 --mpi=none $s trained: $(show "$name")"
done
echo "ok: srun -n2 --mpi=none with horovod or replicated: refused by both tasks (exit 2), pointing at --mpi=pmix"
step none1 -n1 --mpi=none "$CNNBENCH" "${small[@]}" --variable_update=horovod
[ "$rc" -eq 0 ] || fail "srun -n1 --mpi=none horovod: exit $rc: $(show none1)"
grep -q '^Batch size:  4 global$' "$work/none1.out" || fail "srun -n1 --mpi=none: not a world of one: $(show none1)"
step indep -n2 --mpi=none "$CNNBENCH" "${small[@]}" --variable_update=independent \
  --benchmark_log_dir="$work/indep.log"
[ "$rc" -eq 0 ] || fail "srun -n2 --mpi=none independent: exit $rc: $(show indep)"
for r in 0 1; do
  grep -q "the launcher started 2 processes and --variable_update=independent joins none of them: each runs alone (its files are named as rank $r's of 2)" \
    "$work/indep.err" || fail "task $r was not told it runs alone as rank $r of 2: $(show indep)"
  logs=("$work"/indep.log/benchmark_run.job[0-9]*.rank$r.jsonl)
  [ "${#logs[@]}" -eq 1 ] && [ -s "${logs[0]}" ] \
    || fail "not one benchmark log of rank $r named by the job: $(ls "$work/indep.log")"
done
echo "ok: srun -n1 --mpi=none trains as a world of one; -n2 independent: each task alone, files named by SLURM_PROCID"
echo PASS
