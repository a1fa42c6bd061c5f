#!/usr/bin/env bash
# --variable_update=horovod across real processes (mpirun -np 2 and -np 4):
# - equivalence: N ranks of batch b reach the parameters 1 process of batch N*b reaches
#   after K steps, on the same global data (the `sequence` datasource fixture), and every
#   rank holds exactly rank 0's parameters;
# - --compact_gradient_transfer (bf16 on the wire) within a looser, stated tolerance, and
#   visibly different from the fp32 transfer (so it was in effect);
# - one process without mpirun trains exactly as --variable_update=independent;
# - only rank 0 prints the report, and the log lines of the run are tagged [rank N];
# - refusals: --num_gpus=2 (pointing at replicated) and a negative fusion threshold.
set -euo pipefail
: "${CNNBENCH:?}" "${TRAIN_PARAMS:?}" "${PARAMS_COMPARE:?}" "${CNNB_BUILD_DIR:?}" "${CNNB_SOURCE_DIR:?}"
source "$CNNB_SOURCE_DIR/tests/support/mpi.sh"
mpi_require horovod
tmp=$(mktemp -d)
trap 'mpi_cleanup; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export CNNB_PLUGIN_PATH=$CNNB_BUILD_DIR/fixtures/data

# lenet has no batch norm and no dropout, so N replicas of batch b compute the gradient
# of the same N*b examples as one replica, up to the order of the fp32 additions.
K=4 b=2
args=(--model=lenet --datasource=sequence --num_intra_threads=1 --num_warmup_batches=0
      --num_batches=$K --display_every=1 --optimizer=momentum --init_learning_rate=0.01)

# Tolerances, on |a - ref| / (1 + |ref|) after K=4 Nesterov-momentum steps at lr 0.01:
# - fp32, 1e-6. Only the order of additions differs (oneDNN sums N*b examples in its
#   kernels; horovod sums N means of b across ranks), a few ulps (2^-24 ~ 6e-8 relative)
#   per gradient element; a weight moves by lr * (1 + 0.9 + ...) * |g| < 0.1 here, so the
#   parameters differ by ~1e-8 to 1e-7 (measured: 2.4e-8 at np=2, 3.6e-8 at np=4). A lost
#   rank's share or a missing 1/N differs by 3e-2 to 5e-2 on the same run.
# - bf16 on the wire, 3e-3. bf16 keeps 8 significant bits: packing each rank's gradient
#   and each pairwise sum round by up to 2^-9 relative, ~2^-8 ~ 4e-3 of a gradient at
#   np=2, scaled down by lr and momentum in the weights (measured: 9e-4).
# - between ranks, 0: every rank receives the same sum from the allreduce and applies the
#   same update, bit for bit.
# np=4 also takes lenet's 8.3 MiB of gradients in 0.5 MiB buckets, fused up to 1.5 MB:
# several allreduces per step, of one to three buckets each.
buckets=([2]="" [4]="--gradient_bucket_mb=0.5 --horovod_fusion_threshold=1500000")
for N in 2 4; do
  CNNB_PARAMS_OUT=$tmp/ref$N "$TRAIN_PARAMS" "${args[@]}" --batch_size=$((N * b)) >/dev/null 2>"$tmp/ref$N.err" \
    || fail "1 process of batch $((N * b)): $(cat "$tmp/ref$N.err")"
  CNNB_PARAMS_OUT=$tmp/hvd$N mpi_run_bounded 300 "$N" "$TRAIN_PARAMS" "${args[@]}" --batch_size=$b \
    --variable_update=horovod ${buckets[$N]} >"$tmp/hvd$N.out" 2>"$tmp/hvd$N.err" \
    || fail "mpirun -np $N: $(cat "$tmp/hvd$N.out" "$tmp/hvd$N.err")"
  ranks=()
  for ((r = 0; r < N; r++)); do ranks+=("$tmp/hvd$N.$r.0"); done
  "$PARAMS_COMPARE" 1e-6 "$tmp/ref$N.0.0" "${ranks[@]}" || fail "np=$N differs from 1 process of batch $((N * b))"
  "$PARAMS_COMPARE" 0 "$tmp/hvd$N.0.0" "${ranks[@]:1}" || fail "np=$N: the ranks' parameters differ"
  echo "ok: mpirun -np $N x batch $b = 1 process x batch $((N * b))"
done

CNNB_PARAMS_OUT=$tmp/compact mpi_run_bounded 300 2 "$TRAIN_PARAMS" "${args[@]}" --batch_size=$b \
  --variable_update=horovod --compact_gradient_transfer >/dev/null 2>"$tmp/compact.err" \
  || fail "--compact_gradient_transfer: $(cat "$tmp/compact.err")"
grep -q "gradients sent as bf16" "$tmp/compact.err" || fail "compact transfer not announced as bf16"
"$PARAMS_COMPARE" 3e-3 "$tmp/ref2.0.0" "$tmp/compact.0.0" "$tmp/compact.1.0" || fail "compact transfer"
"$PARAMS_COMPARE" 0 "$tmp/compact.0.0" "$tmp/compact.1.0" || fail "compact: the ranks' parameters differ"
! "$PARAMS_COMPARE" 1e-6 "$tmp/hvd2.0.0" "$tmp/compact.0.0" >/dev/null \
  || fail "compact transfer gave the fp32 transfer's parameters: was it in effect?"
echo "ok: --compact_gradient_transfer within 3e-3"

# Only rank 0 reports; every rank's log lines of the run carry its tag.
out=$tmp/hvd2.out err=$tmp/hvd2.err
[ "$(grep -c "^total images/sec:" "$out")" = 1 ] || fail "report lines: $(cat "$out")"
[ "$(grep -c "^Model:" "$out")" = 1 ] || fail "report header printed more than once: $(cat "$out")"
[ "$(grep -c "^Batch size:  4 global" "$out")" = 1 ] || fail "global batch: $(cat "$out")"
for r in 0 1; do
  grep -q "^\[rank $r\] cnnbench: activation memory planned" "$err" || fail "no [rank $r] lines: $(cat "$err")"
done
! grep -q "^cnnbench: activation memory planned" "$err" || fail "an untagged log line: $(cat "$err")"
# tf's progress lines: on rank 0's stdout, as tf prints them; the other ranks log them.
grep -q "^Running warm up$" "$out" || fail "rank 0's progress lines are not on stdout"
grep -q "^\[rank 1\] cnnbench: Running warm up" "$err" || fail "rank 1 did not log its progress"
! grep -q "^\[rank 0\] cnnbench: Running warm up" "$err" || fail "rank 0's progress went to stderr too"
echo "ok: one report (rank 0's); log lines tagged [rank N]"

# One process, no mpirun: a world of one, trains exactly as a single replica does.
CNNB_PARAMS_OUT=$tmp/alone "$TRAIN_PARAMS" "${args[@]}" --batch_size=$b --variable_update=horovod \
  >/dev/null 2>"$tmp/alone.err" || fail "horovod without mpirun: $(cat "$tmp/alone.err")"
CNNB_PARAMS_OUT=$tmp/indep "$TRAIN_PARAMS" "${args[@]}" --batch_size=$b --variable_update=independent >/dev/null 2>&1
"$PARAMS_COMPARE" 0 "$tmp/indep.0.0" "$tmp/alone.0.0" || fail "horovod alone differs from independent"
echo "ok: one process without mpirun"

rc=0
msg=$("$CNNBENCH" --model=lenet --num_batches=1 --variable_update=horovod --num_gpus=2 2>&1) || rc=$?
[ "$rc" != 0 ] && grep -q "one replica per MPI process.*--variable_update=replicated" <<<"$msg" \
  || fail "--num_gpus=2 (exit $rc): $msg"
rc=0
msg=$("$CNNBENCH" --model=lenet --num_batches=1 --variable_update=horovod --horovod_fusion_threshold=-1 2>&1) || rc=$?
[ "$rc" != 0 ] && grep -q -- "--horovod_fusion_threshold=-1" <<<"$msg" || fail "negative fusion threshold (exit $rc): $msg"
echo "ok: refusals"
