#!/usr/bin/env bash
# horovod overlaps communication with backward: with small gradient buckets (lenet's
# gradients in 0.5 MiB buckets: three per step), each rank's --horovod_timeline shows the
# step's first allreduce starting before "backward done" (finish_step entered), on the
# communication thread. Also checks the timeline itself: one file per rank, named
# FILE.rankN.json, every allreduce that starts ends, every bucket announced, strict JSON
# once closed (tests/support/timeline.sh).
set -euo pipefail
: "${CNNBENCH:?}" "${CNNB_SOURCE_DIR:?}"
source "$CNNB_SOURCE_DIR/tests/support/mpi.sh"
source "$CNNB_SOURCE_DIR/tests/support/timeline.sh"
mpi_require horovod
tmp=$(mktemp -d)
trap 'mpi_cleanup; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

K=6
mpi_run_bounded 300 2 "$CNNBENCH" --model=lenet --batch_size=64 --num_batches=$K --num_warmup_batches=0 \
  --num_intra_threads=1 --variable_update=horovod --gradient_bucket_mb=0.5 \
  --horovod_fusion_threshold=1000000 --horovod_timeline="$tmp/trace.json" >"$tmp/out" 2>&1 \
  || fail "the run: $(cat "$tmp/out")"

for r in 0 1; do
  timeline_check "$tmp/trace.rank$r.json" $K 2 || exit 1
done
how=$(timeline_field "$tmp/trace.rank0.json" allreduce how)
[ "$how" = "MPI fp32" ] || fail "the allreduce says how '$how', want 'MPI fp32'"
