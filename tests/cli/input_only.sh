#!/usr/bin/env bash
# --input_only: the input pipeline alone, reported like a run.
# - the header says "Mode: input-only", step lines "N<TAB>images/sec: ..." without a loss,
#   the usual framed total; no model is built onto a device (no executor: the activation
#   memory line and "Generating ... model" never appear);
# - it reads the training split (training=1), one shard per replica, and reports the
#   skipped count of the stats extension;
# - across 2 ranks (when mpirun and the horovod plugin are there) the total adds both
#   ranks' images;
# - refused with --eval and --forward_only, naming both flags, exit status 2.
set -euo pipefail
: "${CNNBENCH:?}" "${CNNB_BUILD_DIR:?}" "${CNNB_SOURCE_DIR:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; for f in "$tmp"/*; do echo "--- $f"; cat "$f"; done; exit 1; }
fixtures=$CNNB_BUILD_DIR/fixtures/data

# A model whose graph would take seconds to plan and gigabytes to allocate: --input_only
# must not build it onto the device.
"$CNNBENCH" --input_only --model=vgg16 --batch_size=8 --num_gpus=2 --variable_update=independent --num_batches=20 \
  --num_warmup_batches=2 --display_every=5 --log_level=debug >"$tmp/in.out" 2>"$tmp/in.err" \
  || fail "--input_only: exit $?"
grep -q '^Mode:        input-only$' "$tmp/in.out" || fail "mode line"
grep -q $'^Step\tImg/sec$' "$tmp/in.out" || fail "step header without loss column"
steps=$(grep -cP '^\d+\timages/sec: \d+\.\d \+/- \d+\.\d \(jitter = \d+\.\d\)$' "$tmp/in.out") || true
[ "$steps" -eq 5 ] || fail "want 5 step lines (1, 5, 10, 15, 20), got $steps"
grep -qP '^total images/sec: \d+\.\d\d$' "$tmp/in.out" || fail "no total"
total=$(sed -n 's/^total images\/sec: //p' "$tmp/in.out")
awk -v t="$total" 'BEGIN { exit !(t > 0) }' || fail "total $total is not positive"
grep -qE 'executor:|activation memory planned|Generating' "$tmp/in.err" && fail "--input_only built the model on the device"
echo "ok: input-only report, $total images/sec over 2 replicas, no executor"

# The training split, every replica's shard, and the stats extension (shards skip 1 + 2).
"$CNNBENCH" --plugin="$fixtures/libfixture_eval_data.so" --datasource=eval_data --input_only \
  --batch_size=4 --num_gpus=2 --variable_update=independent --num_batches=6 >"$tmp/fx.out" 2>"$tmp/fx.err" || fail "fixture: exit $?"
for shard in 0 1; do
  grep -q "eval_data: shard $shard of 2, training=1" "$tmp/fx.err" || fail "shard $shard not read from the training split"
done
[ "$(tail -1 "$tmp/fx.out")" = "skipped 3 unreadable examples" ] || fail "skipped count missing from the report"
echo "ok: training split, one shard per replica, skipped count reported"

# Refusals: both flags named, exit 2.
for other in --eval --forward_only; do
  set +e
  "$CNNBENCH" --input_only "$other" >"$tmp/bad.out" 2>"$tmp/bad.err"; rc=$?
  set -e
  [ "$rc" -eq 2 ] || fail "--input_only $other: exit $rc, want 2"
  grep -qF -- "--input_only and $other both given" "$tmp/bad.err" || fail "--input_only $other: message"
done
echo "ok: refused with --eval and --forward_only"

source "$CNNB_SOURCE_DIR/tests/support/mpi.sh"
if command -v mpirun >/dev/null 2>&1 && [ -e "$CNNB_PLUGIN_DIR/libcnnb_strategy_horovod.so" ]; then
  trap 'mpi_cleanup; rm -rf "$tmp"' EXIT
  mpi_run_bounded 300 2 "$CNNBENCH" --variable_update=horovod --input_only --batch_size=4 \
    --num_batches=5 --num_intra_threads=1 >"$tmp/mpi.out" 2>"$tmp/mpi.err" || fail "mpirun -np 2: exit $?"
  grep -q '^Batch size:  8 global$' "$tmp/mpi.out" || fail "2 ranks: global batch"
  grep -qP '^total images/sec: \d+\.\d\d \(2 ranks: ' "$tmp/mpi.out" || fail "2 ranks: total over ranks"
  echo "ok: 2 ranks"
fi
echo "PASS"
