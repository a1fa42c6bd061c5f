#!/usr/bin/env bash
# Ranks agree on every flag that changes training (issue 23, finding 8): a job whose
# ranks were started with different learning rates, optimizers, weight decay, seeds,
# --train_dir, or a plugin's flag is refused before the first step on every rank, exit
# 2, naming each flag and its value on each rank; flags marked "may differ per rank"
# (--log_level, --display_every, --trace_file, --num_intra_threads, a plugin's
# --horovod_timeline, tf's --task_index) may differ; one value spelled two ways agrees.
# Each job runs as MPMD (mpirun -np 1 A : -np 1 B), the way a user gives ranks different
# command lines.
set -euo pipefail
: "${CNNBENCH:?}" "${CNNB_SOURCE_DIR:?}"
source "$CNNB_SOURCE_DIR/tests/support/mpi.sh"
mpi_require horovod
tmp=$(mktemp -d)
trap 'mpi_cleanup; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; [ -f "$tmp/out" ] && tail -n 20 "$tmp/out"; exit 1; }

base=(--model=lenet --batch_size=4 --num_batches=2 --num_warmup_batches=0
      --variable_update=horovod --num_intra_threads=1)

# job "rank 0's extra flags" "rank 1's extra flags": runs the job, sets $rc.
job() {
  local -a a b
  read -ra a <<<"$1"
  read -ra b <<<"$2"
  rc=0
  timeout -s KILL 120 mpirun "${MPI_FLAGS[@]}" -np 1 "$CNNBENCH" "${base[@]}" "${a[@]}" \
    : -np 1 "$CNNBENCH" "${base[@]}" "${b[@]}" >"$tmp/out" 2>&1 || rc=$?
}

# Both ranks say it, before any step.
names() {
  for r in 0 1; do
    grep -F "[rank $r] ranks disagree on the run:" "$tmp/out" | grep -qF -- "$1" \
      || fail "rank $r does not say: $1"
  done
}

# The issue's case: rank 0's loss was 18,884 at step 3 instead of 1.28.
job "" "--init_learning_rate=5 --optimizer=momentum --weight_decay=0.01 --seed=7"
[ "$rc" = 2 ] || fail "ranks with different training flags: exit $rc, not 2"
names "--optimizer is sgd on rank 0, momentum on rank 1"
names "--init_learning_rate is 0 on rank 0, 5 on rank 1"
names "--weight_decay is 4e-05 on rank 0, 0.01 on rank 1"
names "--seed is 1234 on rank 0, 7 on rank 1"
! grep -q "^Step\|images/sec" "$tmp/out" || fail "ranks that disagree trained"
echo "ok: different training flags refused: $(grep -m1 -o 'ranks disagree.*' "$tmp/out" | cut -c1-200)"

# --train_dir on rank 0 only, and two different ones: found before any checkpoint is read.
job "--train_dir=$tmp/ckpt" ""
[ "$rc" = 2 ] || fail "--train_dir on rank 0 only: exit $rc, not 2"
names "--train_dir is $tmp/ckpt on rank 0, \"\" on rank 1"
job "--train_dir=$tmp/a" "--train_dir=$tmp/b"
[ "$rc" = 2 ] || fail "two --train_dir: exit $rc, not 2"
names "--train_dir is $tmp/a on rank 0, $tmp/b on rank 1"
echo "ok: --train_dir on one rank, or two of them, refused"

# A plugin's flag, and a flag only one rank's plugins declare (a tf flag nobody reads
# there is per rank; a core flag given to one rank only still differs in value).
job "--horovod_fusion_threshold=0" ""
[ "$rc" = 2 ] || fail "different --horovod_fusion_threshold: exit $rc, not 2"
names "--horovod_fusion_threshold is 0 on rank 0, 67108864 on rank 1"
echo "ok: a plugin's flag is compared"

# The views and the flags together, each difference named once.
job "--batch_size=8" ""
[ "$rc" = 2 ] || fail "different --batch_size: exit $rc, not 2"
names "--batch_size is 8 on rank 0, 4 on rank 1"
n=$(grep -F "[rank 0] ranks disagree" "$tmp/out" | grep -o -- "--batch_size is" | wc -l)
[ "$n" = 1 ] || fail "--batch_size named $n times in one message"

# Flags that may differ per rank, and one value in two spellings: the job trains.
job "--log_level=warn --display_every=1 --trace_file=$tmp/t0.json --horovod_timeline=$tmp/tl.json --task_index=0 --init_learning_rate=0.10 --seed=3" \
    "--num_intra_threads=2 --task_index=1 --init_learning_rate=0.1 --tf_random_seed=3"
[ "$rc" = 0 ] || fail "ranks differing only in per-rank flags were refused (exit $rc)"
grep -q "total images/sec" "$tmp/out" || fail "no total after a job of per-rank differences"
echo "ok: per-rank flags may differ, one value spelled two ways agrees"

# --help says which flags may differ, in the flag's help text.
"$CNNBENCH" --help >"$tmp/help"
help_of() { # the flag's header and help, on one line
  awk -v flag="  --$1 " -v bool="  --[no]$1 " 'index($0, flag) == 1 || index($0, bool) == 1 {on = 1; print; next}
    on && /^  --/ {exit} on && NF {print}' "$tmp/help" | tr -s ' \n' '  '
}
help_of log_level | grep -q "May differ per rank\." || fail "--help does not mark --log_level"
help_of horovod_timeline | grep -q "May differ per rank\." \
  || fail "--help does not mark the plugin's --horovod_timeline"
help_of init_learning_rate | grep -q "init_learning_rate" || fail "no --init_learning_rate in --help"
! help_of init_learning_rate | grep -q "May differ per rank" \
  || fail "--help marks --init_learning_rate as per rank"
echo "PASS: ranks agree on every training flag; per-rank flags may differ"
