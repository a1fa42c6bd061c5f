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
# Every rank fuses the same buckets into the same allreduces, whatever the timing (an
# allreduce of different ranges would mix unrelated gradients): the ranks' sequences of
# (step, buckets, bytes) are identical. Rank 1 runs niced, so its buckets come at other
# moments than rank 0's. (lenet's buckets: 2.1, 6.4 and 0.2 MB; 8.5 MB fuses the first two.)
groups() { grep '"name": "allreduce", "ph": "B"' "$1" | sed 's/.*"step": \([0-9]*\), "what": "\([^"]*\)", "bytes": \([0-9]*\).*/\1 \2 \3/'; }
mpi_run_bounded 300 2 bash -c '[ "$OMPI_COMM_WORLD_RANK" = 1 ] && exec nice -n 19 "$0" "$@"; exec "$0" "$@"' \
  "$CNNBENCH" --model=lenet --batch_size=64 --num_batches=$K --num_warmup_batches=0 \
  --num_intra_threads=1 --variable_update=horovod --gradient_bucket_mb=0.5 \
  --horovod_fusion_threshold=8500000 --horovod_timeline="$tmp/fused.json" >"$tmp/out" 2>&1 \
  || fail "the fused run: $(cat "$tmp/out")"
[ "$(groups "$tmp/fused.rank0.json" | wc -l)" -ge $K ] || fail "no fused allreduces in $tmp/fused.rank0.json"
grep -q '"what": "buckets ' "$tmp/fused.rank0.json" || fail "no allreduce fused several buckets"
diff <(groups "$tmp/fused.rank0.json") <(groups "$tmp/fused.rank1.json") >"$tmp/diff" \
  || fail "the ranks fused different buckets: $(cat "$tmp/diff")"
echo "ok: both ranks fused the same buckets into the same $(groups "$tmp/fused.rank0.json" | wc -l) allreduces"

how=$(timeline_field "$tmp/trace.rank0.json" allreduce how)
[ "$how" = "MPI fp32" ] || fail "the allreduce says how '$how', want 'MPI fp32'"
