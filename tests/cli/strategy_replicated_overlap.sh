#!/usr/bin/env bash
# replicated overlaps its all-reduce with the last replica's backward (issue 8): with
# lenet's gradients in 0.5 MiB buckets (three per step), each rank's --replicated_timeline
# shows, in most steps, the first bucket's all-reduce starting before "backward done"
# (finish_step entered: the last local replica's backward is over), in three set-ups:
#  - in-process, --num_gpus=2 on the cpu device (host memory): the communication thread
#    reduces, while the step thread runs replica 1's backward;
#  - the same on the fixture device without host memory: ranges are staged and reduced
#    on the step thread inside bucket_ready, during replica 1's backward;
#  - mpirun -np 2 x --num_gpus=2: local ring, then MPI across the ranks, one file per rank.
# Also the timeline itself (tests/support/timeline.sh: one file per rank, closed, strict
# JSON, every allreduce ended) and what each allreduce says it did ("how"), and a path
# that cannot be created is refused naming the flag.
set -euo pipefail
: "${CNNBENCH:?}" "${CNNB_SOURCE_DIR:?}" "${CNNB_BUILD_DIR:?}" "${CNNB_PLUGIN_DIR:?}"
[ -e "$CNNB_PLUGIN_DIR/libcnnb_strategy_replicated.so" ] \
  || { echo "SKIP: strategy plugin replicated not built"; exit 77; }
source "$CNNB_SOURCE_DIR/tests/support/mpi.sh"
source "$CNNB_SOURCE_DIR/tests/support/timeline.sh"
tmp=$(mktemp -d)
trap 'mpi_cleanup; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

K=6
args=(--model=lenet --batch_size=32 --num_batches=$K --num_warmup_batches=0 --num_intra_threads=1
      --variable_update=replicated --num_gpus=2 --gradient_bucket_mb=0.5)

"$CNNBENCH" "${args[@]}" --replicated_timeline="$tmp/local.json" >"$tmp/local.out" 2>&1 \
  || fail "in-process: $(cat "$tmp/local.out")"
[ "$(ls "$tmp" | grep -c '^local.*json$')" = 1 ] || fail "in-process wrote $(ls "$tmp")"
timeline_check "$tmp/local.rank0.json" $K 2 || exit 1
how=$(timeline_field "$tmp/local.rank0.json" allreduce how)
[ "$how" = "xring#1" ] || fail "in-process: the allreduce says how '$how', want 'xring#1'"

CNNB_PLUGIN_PATH="$CNNB_BUILD_DIR/fixtures/faults" "$CNNBENCH" "${args[@]}" --device=fixture_minimal \
  --replicated_timeline="$tmp/staged.json" >"$tmp/staged.out" 2>&1 \
  || fail "staged: $(cat "$tmp/staged.out")"
timeline_check "$tmp/staged.rank0.json" $K 1 || exit 1

if command -v mpirun >/dev/null 2>&1; then
  mpi_run_bounded 300 2 "$CNNBENCH" "${args[@]}" --replicated_timeline="$tmp/mpi" \
    >"$tmp/mpi.out" 2>&1 || fail "mpirun -np 2: $(cat "$tmp/mpi.out")"
  for r in 0 1; do
    timeline_check "$tmp/mpi.rank$r.json" $K 2 || exit 1
    how=$(timeline_field "$tmp/mpi.rank$r.json" allreduce how)
    [ "$how" = "xring#1, then MPI fp32" ] || fail "rank $r: the allreduce says how '$how'"
  done
else
  echo "note: mpirun not found: the in-process cases only"
fi

rc=0
msg=$("$CNNBENCH" "${args[@]}" --num_batches=1 --replicated_timeline="$tmp/no/such/dir/t.json" 2>&1) || rc=$?
[ "$rc" != 0 ] && grep -q -- "--replicated_timeline=$tmp/no/such/dir/t.json: cannot create" <<<"$msg" \
  || fail "an uncreatable timeline (exit $rc): $msg"
echo "ok: an uncreatable timeline is refused naming the flag"
