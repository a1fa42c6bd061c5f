#!/usr/bin/env bash
# --horovod_hierarchical_allreduce (Horovod's HOROVOD_HIERARCHICAL_ALLREDUCE) on this one
# machine, where every rank is on one node: the sum is a reduce to the node's leader and
# its broadcast (mpi_world_allreduce_sum_hierarchical; its step across several nodes'
# leaders is driven by cli_mpi_world with the ranks regrouped into nodes):
# - equivalence: mpirun -np 2 and -np 4 of batch b reach the parameters of 1 process of
#   batch N*b (1e-6, as cli_strategy_horovod: only the order of fp32 additions differs),
#   every rank holds rank 0's parameters bit for bit (the leader's sum is broadcast), and
#   the flat allreduce's parameters within the same 1e-6;
# - it is in effect: each rank logs the hierarchy (1 node, its local rank, leader or not)
#   and its timeline's allreduces say "MPI hierarchical";
# - --compact_gradient_transfer applies between nodes only: on one node nothing travels
#   in 16 bits, so the result is the fp32 one (1e-6), where the flat compact transfer
#   differs by ~1e-3 (cli_strategy_horovod).
set -euo pipefail
: "${CNNBENCH:?}" "${TRAIN_PARAMS:?}" "${PARAMS_COMPARE:?}" "${CNNB_BUILD_DIR:?}" "${CNNB_SOURCE_DIR:?}"
source "$CNNB_SOURCE_DIR/tests/support/mpi.sh"
source "$CNNB_SOURCE_DIR/tests/support/timeline.sh"
mpi_require horovod
tmp=$(mktemp -d)
trap 'mpi_cleanup; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export CNNB_PLUGIN_PATH=$CNNB_BUILD_DIR/fixtures/data

K=4 b=2
args=(--model=lenet --datasource=sequence --num_intra_threads=1 --num_warmup_batches=0
      --num_batches=$K --display_every=1 --optimizer=momentum --init_learning_rate=0.01)
# np=4 in 0.5 MiB buckets fused up to 1.5 MB: several allreduces a step.
buckets=([2]="" [4]="--gradient_bucket_mb=0.5 --horovod_fusion_threshold=1500000")
for N in 2 4; do
  CNNB_PARAMS_OUT=$tmp/ref$N "$TRAIN_PARAMS" "${args[@]}" --batch_size=$((N * b)) >/dev/null 2>"$tmp/ref$N.err" \
    || fail "1 process of batch $((N * b)): $(cat "$tmp/ref$N.err")"
  for mode in flat hier; do
    extra=()
    [ $mode = hier ] && extra=(--horovod_hierarchical_allreduce --horovod_timeline="$tmp/t$N.json")
    CNNB_PARAMS_OUT=$tmp/$mode$N mpi_run_bounded 300 "$N" "$TRAIN_PARAMS" "${args[@]}" --batch_size=$b \
      --variable_update=horovod ${buckets[$N]} "${extra[@]}" >"$tmp/$mode$N.out" 2>"$tmp/$mode$N.err" \
      || fail "mpirun -np $N ($mode): $(cat "$tmp/$mode$N.out" "$tmp/$mode$N.err")"
  done
  ranks=()
  for ((r = 0; r < N; r++)); do ranks+=("$tmp/hier$N.$r.0"); done
  "$PARAMS_COMPARE" 1e-6 "$tmp/ref$N.0.0" "${ranks[@]}" || fail "np=$N hierarchical differs from 1 process of batch $((N * b))"
  "$PARAMS_COMPARE" 0 "$tmp/hier$N.0.0" "${ranks[@]:1}" || fail "np=$N hierarchical: the ranks' parameters differ"
  "$PARAMS_COMPARE" 1e-6 "$tmp/flat$N.0.0" "$tmp/hier$N.0.0" || fail "np=$N: hierarchical differs from flat"
  for ((r = 0; r < N; r++)); do
    role="not a leader"; [ $r = 0 ] && role="the node's leader"
    grep -q "rank $r of $N;.*hierarchical allreduce over 1 node (local rank $r of $N: $role)" "$tmp/hier$N.err" \
      || fail "np=$N: rank $r did not log its place in the hierarchy: $(grep "rank $r of" "$tmp/hier$N.err")"
    how=$(timeline_field "$tmp/t$N.rank$r.json" allreduce how)
    [ "$how" = "MPI hierarchical, fp32 between nodes" ] || fail "np=$N rank $r: the timeline says how '$how'"
  done
  echo "ok: mpirun -np $N x batch $b hierarchical = 1 process x batch $((N * b)) = flat; ranks identical"
done

CNNB_PARAMS_OUT=$tmp/compact mpi_run_bounded 300 2 "$TRAIN_PARAMS" "${args[@]}" --batch_size=$b \
  --variable_update=horovod --horovod_hierarchical_allreduce --compact_gradient_transfer \
  >/dev/null 2>"$tmp/compact.err" || fail "hierarchical, compact: $(cat "$tmp/compact.err")"
grep -q "gradients sent as bf16 between nodes; hierarchical allreduce over 1 node" "$tmp/compact.err" \
  || fail "hierarchical, compact: not announced: $(grep "rank 0 of" "$tmp/compact.err")"
"$PARAMS_COMPARE" 1e-6 "$tmp/ref2.0.0" "$tmp/compact.0.0" "$tmp/compact.1.0" \
  || fail "hierarchical, compact on one node is not the fp32 result"
echo "ok: --compact_gradient_transfer with one node sends nothing in 16 bits (fp32 result)"
