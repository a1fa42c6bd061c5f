#!/usr/bin/env bash
# A preempted Slurm job loses nothing (issue 35): docs/slurm.md's cnnbench.sbatch, taken
# from the page as written, submitted with sbatch to a real slurmctld and slurmd on this
# machine (tests/support/slurm_cluster.sh), running a 2-rank horovod lenet with
# --train_dir:
# - uninterrupted, the job completes (ExitCode 0:0, no restart) and leaves the final
#   checkpoint model.ckpt-<total + warm-up>;
# - the same job again, given `scancel --signal=USR1 --batch` (what `#SBATCH
#   --signal=B:USR1@60` sends before the time limit) once its output shows step 3: the
#   script passes the signal on through srun, both ranks stop at one step (the step is
#   short of the total: the stop was mid-run), rank 0 alone saves that step's checkpoint
#   (one "saved checkpoint" line, rank 0's; one stop line naming the file, which is
#   there), srun exits 138 (128 + SIGUSR1) and the script requeues the job, once;
# - the requeued job (Restarts=1) resumes from that checkpoint on both ranks, runs to the
#   same total, completes (ExitCode 0:0), and its final checkpoint is byte for byte the
#   uninterrupted job's (cmp; the cpu device sums in the same order on every run);
# - once more, given `scancel --signal=TERM` (to the tasks) at step 3: the same stop and
#   one save by rank 0, and the job FAILED with ExitCode 143:0, not requeued.
# Skips (77, saying why) where Slurm cannot run: not root, slurm-wlm not installed, its
# daemons failing to start, or no pmix plugin in this Slurm.
set -uo pipefail
: "${CNNBENCH:?}" "${CHECKPOINT_COMPARE:?}" "${CNNB_SOURCE_DIR:?}"
source "$CNNB_SOURCE_DIR/tests/support/mpi.sh"
source "$CNNB_SOURCE_DIR/tests/support/slurm_cluster.sh"
mpi_require horovod
slurm_require
fail() {
  echo "FAIL: $*"
  local f
  for f in "$work"/*.out; do
    [ -e "$f" ] || continue
    echo "--- $f (last lines)"
    tail -n 12 "$f"
  done
  slurm_logs
  exit 1
}
slurm_up
work=$(mktemp -d)
trap 'slurm_down; rm -rf "$work"' EXIT
# The job gets slurm_mpi_pmix's OpenMPI environment (sbatch's --export=ALL), and cnnbench
# from this build on its PATH.
slurm_mpi_pmix "$work/mpi_list"
PATH="$(dirname "$CNNBENCH"):$PATH"

# The script: the ```bash block after the page's marker comment.
script=$work/cnnbench.sbatch
awk '/^<!-- tests\/cli\/slurm_requeue.sh submits this script as written -->$/ { mark = 1; next }
     mark && !inblock && /^```bash$/ { inblock = 1; next }
     inblock && /^```$/ { exit }
     inblock { print }' "$CNNB_SOURCE_DIR/docs/slurm.md" >"$script"
[ -s "$script" ] || fail "docs/slurm.md has no cnnbench.sbatch block after its marker comment"
bash -n "$script" || fail "docs/slurm.md's cnnbench.sbatch is not valid bash"

# lenet at batch 4, 2 ranks on 2 cores: ~25 steps a second. The signal comes at step 3,
# ~190 steps (seconds) before the run could end on its own; the test fails, saying so,
# if it ever came too late.
total=200 warmup=2
run=(--model=lenet --batch_size=4 --num_intra_threads=1 --num_warmup_batches="$warmup" --display_every=1
     --num_batches="$total" --variable_update=horovod)
final=$(printf 'model.ckpt-%010d.safetensors' $((total + warmup)))
# submit NAME: the job id of cnnbench.sbatch submitted with --train_dir=NAME.d, its output
# (both runs of a requeued job: --open-mode=append) in NAME.out.
submit() {
  local id
  id=$(sbatch --parsable --chdir="$work" --output="$work/$1.out" "$script" "${run[@]}" \
    --train_dir="$work/$1.d" --benchmark_log_dir="$work/$1.log") || fail "sbatch $1: exit $?"
  echo "${id%%;*}"
}
# ended ID NAME: the job has ended (within 600 s: a sanitizer build is several times
# slower), COMPLETED with ExitCode 0:0.
ended() {
  slurm_wait_job "$1" 600 || fail "$2: job $1 still $(slurm_job_state "$1") after 600 s"
  [ "$(slurm_job_state "$1")" = COMPLETED ] || fail "$2: job $1 ended $(slurm_job_state "$1")"
  [ "$(slurm_job_field "$1" ExitCode)" = 0:0 ] || fail "$2: job $1 ExitCode $(slurm_job_field "$1" ExitCode)"
}

# ---- uninterrupted -------------------------------------------------------------------------
t0=$SECONDS
id=$(submit straight)
ended "$id" straight
[ "$(slurm_job_field "$id" Restarts)" = 0 ] || fail "straight: job $id restarted"
[ -s "$work/straight.d/$final" ] || fail "straight: no $final: $(ls "$work/straight.d")"
echo "ok: the uninterrupted job completed (ExitCode 0:0) with $final ($((SECONDS - t0)) s)"

# ---- USR1 mid-run, requeued, resumed ---------------------------------------------------------
t0=$SECONDS
id=$(submit stopped)
out=$work/stopped.out
for _ in $(seq 1200); do
  grep -qP '^3\t' "$out" 2>/dev/null && break
  case $(slurm_job_state "$id") in PENDING | RUNNING | CONFIGURING) ;; *) fail "stopped: job $id ended before step 3" ;; esac
  sleep 0.1
done
grep -qP '^3\t' "$out" || fail "stopped: no step 3 within 120 s"
scancel --signal=USR1 --batch "$id" || fail "scancel --signal=USR1 --batch $id: exit $?"
for _ in $(seq 600); do
  [ "$(slurm_job_field "$id" Restarts)" = 1 ] && break
  sleep 0.1
done
[ "$(slurm_job_field "$id" Restarts)" = 1 ] || fail "stopped: job $id not requeued within 60 s"
ended "$id" stopped
[ "$(slurm_job_field "$id" Restarts)" = 1 ] || fail "stopped: job $id restarted $(slurm_job_field "$id" Restarts) times"
requeue_line="cnnbench.sbatch: stopped by SIGUSR1 with a checkpoint: requeueing job $id"
[ "$(grep -cxF "$requeue_line" "$out")" -eq 1 ] || fail "stopped: not one line '$requeue_line'"
sed "/^$requeue_line\$/q" "$out" >"$work/first.out"
sed "1,/^$requeue_line\$/d" "$out" >"$work/second.out"

# The first run: every rank stopped at one step, rank 0 saved it, once.
n=$(grep -c '^cnnbench: SIGUSR1 ' "$work/first.out")
[ "$n" -eq 1 ] || fail "stopped: $n stop lines, not 1"
line=$(grep '^cnnbench: SIGUSR1 ' "$work/first.out")
[[ $line =~ ^cnnbench:\ SIGUSR1\ \(to\ [12]\ of\ 2\ ranks\)\ at\ step\ ([0-9]+)\ \(global\ step\ ([0-9]+)\):\ saved\ checkpoint\ (.+)\;\ every\ rank\ stopping$ ]] \
  || fail "stopped: the stop line: $line"
step=${BASH_REMATCH[1]} global=${BASH_REMATCH[2]} ckpt=${BASH_REMATCH[3]}
[ "$step" -ge 3 ] && [ "$step" -lt "$total" ] || fail "stopped: stopped at step $step of $total: not mid-run"
[ "$global" -eq $((step + warmup)) ] || fail "stopped: global step $global after step $step and $warmup warm-up steps"
[ "$ckpt" = "$work/stopped.d/$(printf 'model.ckpt-%010d.safetensors' "$global")" ] || fail "stopped: the checkpoint named is $ckpt"
[ -s "$ckpt" ] || fail "stopped: $ckpt is not there"
saves=$(grep -c 'cnnbench: saved checkpoint ' "$work/first.out")
[ "$saves" -eq 1 ] || fail "stopped: $saves checkpoint saves, not 1"
grep -qF "[rank 0] cnnbench: saved checkpoint $ckpt (step $global," "$work/first.out" \
  || fail "stopped: the one save is not rank 0's of $ckpt"
grep -qP "^total images/sec: [0-9.]+ \(interrupted by SIGUSR1 after $step of $total steps; 2 ranks" "$work/first.out" \
  || fail "stopped: no interrupted total over 2 ranks"
echo "ok: scancel --signal=USR1 --batch at step 3: both ranks stopped at step $step, rank 0 saved $(basename "$ckpt") once, srun exited 138, the job requeued itself"

# The requeued run: resumed there on both ranks, ran to the total, the same final weights.
for r in 0 1; do
  grep -qF "[rank $r] cnnbench: resuming from $ckpt (global step $global)" "$work/second.out" \
    || fail "resumed: rank $r did not resume from $ckpt"
done
grep -q "^Num batches: $total$" "$work/second.out" || fail "resumed: not to the same total"
grep -qP '^total images/sec: [0-9.]+ \(2 ranks' "$work/second.out" || fail "resumed: no uninterrupted total over 2 ranks"
! grep -q 'interrupted\|SIGUSR1' "$work/second.out" || fail "resumed: the requeued run was interrupted too"
[ -s "$work/stopped.d/$final" ] || fail "resumed: no $final: $(ls "$work/stopped.d")"
cmp "$work/straight.d/$final" "$work/stopped.d/$final" \
  || fail "resumed: $final differs from the uninterrupted job's: $("$CHECKPOINT_COMPARE" 0 "$work/straight.d/$final" "$work/stopped.d/$final" 2>&1)"
echo "ok: the requeued job resumed at global step $global on both ranks, completed (ExitCode 0:0) with $final byte-identical to the uninterrupted job's ($((SECONDS - t0)) s)"
# Both runs of the job kept their logs: the requeued one's carry its restart.
for r in 0 1; do
  first="$work/stopped.log/benchmark_run.job$id.rank$r.jsonl"
  second="$work/stopped.log/benchmark_run.job$id.restart1.rank$r.jsonl"
  grep -q '"status": *"interrupted' "$first" \
    || fail "logs: rank $r's first run's log lost or not interrupted: $(ls "$work/stopped.log")"
  grep -q '"status": *"ok"' "$second" || fail "logs: rank $r's requeued run's log: $(ls "$work/stopped.log")"
done
echo "ok: both runs' benchmark logs kept, named by job $id and its restart"

# ---- scancel --signal=TERM: the same stop and save, no requeue -------------------------------
t0=$SECONDS
id=$(submit termed)
out=$work/termed.out
for _ in $(seq 1200); do
  grep -qP '^3\t' "$out" 2>/dev/null && break
  case $(slurm_job_state "$id") in PENDING | RUNNING | CONFIGURING) ;; *) fail "termed: job $id ended before step 3" ;; esac
  sleep 0.1
done
grep -qP '^3\t' "$out" || fail "termed: no step 3 within 120 s"
scancel --signal=TERM "$id" || fail "scancel --signal=TERM $id: exit $?"
slurm_wait_job "$id" 300 || fail "termed: job $id still $(slurm_job_state "$id") after 300 s"
[ "$(slurm_job_state "$id")" = FAILED ] && [ "$(slurm_job_field "$id" ExitCode)" = 143:0 ] \
  || fail "termed: job $id ended $(slurm_job_state "$id"), ExitCode $(slurm_job_field "$id" ExitCode), not FAILED 143:0"
[ "$(slurm_job_field "$id" Restarts)" = 0 ] || fail "termed: job $id was requeued"
line=$(grep '^cnnbench: SIGTERM ' "$out")
[[ $line =~ ^cnnbench:\ SIGTERM\ \(to\ [12]\ of\ 2\ ranks\)\ at\ step\ ([0-9]+)\ \(global\ step\ ([0-9]+)\):\ saved\ checkpoint\ (.+)\;\ every\ rank\ stopping$ ]] \
  || fail "termed: not one stop line: $line"
[ "${BASH_REMATCH[1]}" -lt "$total" ] && [ -s "${BASH_REMATCH[3]}" ] \
  || fail "termed: stopped at step ${BASH_REMATCH[1]} of $total, ${BASH_REMATCH[3]} not there"
[ "$(grep -c 'cnnbench: saved checkpoint ' "$out")" -eq 1 ] || fail "termed: not one checkpoint save"
! grep -q 'requeueing' "$out" || fail "termed: the script requeued the job"
echo "ok: scancel --signal=TERM at step 3: both ranks stopped at step ${BASH_REMATCH[1]}, rank 0 saved $(basename "${BASH_REMATCH[3]}"), the job FAILED with ExitCode 143:0, not requeued ($((SECONDS - t0)) s)"
echo PASS
