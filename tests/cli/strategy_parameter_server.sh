#!/usr/bin/env bash
# --variable_update=parameter_server in one process: N replicas x batch b reach the same
# parameters after K steps as 1 replica x batch N*b on the same examples (the `sequence`
# fixture makes the data match), every replica holds the same values, and the flags it
# cannot honour are refused by name. The runs across ranks are strategy_ps_mpi.sh.
#
# Tolerance 1e-5 (relative to 1 + |w|): the only difference allowed is fp32 reassociation
# (N partial sums of b examples instead of one sum of N*b), a few ulp (~1e-7) per
# gradient element, carried through 4 momentum steps at lr 0.05: observed ~4e-8. A real
# error is orders larger: an unscaled sum, a skipped replica or a stale pull moves
# weights by lr*g ~ 1e-3..1e-1. Adam is left out: m/sqrt(v) maps ulp-level differences
# of near-zero gradients to +-lr, so equal math still differs by ~1e-4 there.
set -euo pipefail
: "${TRAIN_PARAMS:?}" "${PARAMS_COMPARE:?}" "${CNNB_BUILD_DIR:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CNNB_PLUGIN_PATH="$CNNB_BUILD_DIR/fixtures/data"
common=(--model=lenet --datasource=sequence --num_batches=4 --num_warmup_batches=0
        --num_intra_threads=1 --init_learning_rate=0.05 --weight_decay=1e-4)
fail() { echo "FAIL: $*"; exit 1; }

for optimizer in momentum sgd rmsprop; do
  CNNB_PARAMS_OUT="$tmp/one" "$TRAIN_PARAMS" "${common[@]}" --optimizer=$optimizer \
    --batch_size=8 --variable_update=independent >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "1 replica ($optimizer)"; }
  for n in 2 4; do
    CNNB_PARAMS_OUT="$tmp/ps$n" "$TRAIN_PARAMS" "${common[@]}" --optimizer=$optimizer \
      --batch_size=$((8 / n)) --num_gpus=$n --variable_update=parameter_server >"$tmp/out" 2>&1 \
      || { cat "$tmp/out"; fail "$n replicas ($optimizer)"; }
    grep -q "^Variables:   parameter_server" "$tmp/out" || { cat "$tmp/out"; fail "report names the strategy"; }
    "$PARAMS_COMPARE" 1e-5 "$tmp/one.0.0" "$tmp/ps$n".0.* || fail "$n replicas x $((8 / n)) vs 1 x 8 ($optimizer)"
    rm -f "$tmp"/ps$n.*
  done
done

# What it cannot do is refused before training, naming the flag.
expect_refusal() {
  local want=$1; shift
  set +e
  "$CNNBENCH" --model=lenet --batch_size=2 --num_batches=1 --variable_update=parameter_server \
    "$@" >"$tmp/out" 2>&1
  local code=$?
  set -e
  [ $code -eq 2 ] || { cat "$tmp/out"; fail "$*: exit $code, not 2"; }
  grep -qF -- "$want" "$tmp/out" || { cat "$tmp/out"; fail "$*: no '$want'"; }
  ! grep -q "total images/sec" "$tmp/out" || fail "$*: trained anyway"
}
expect_refusal "--num_ps_ranks=2: must be in [1, 1]" --num_ps_ranks=2
expect_refusal "--local_parameter_device=tpu: must be cpu (host memory) or gpu" --local_parameter_device=tpu
# gpu (tf's default, and given by name) on the cpu device is host memory, quietly, as
# tf's soft placement: the same training as cpu.
for where in cpu gpu; do
  CNNB_PARAMS_OUT="$tmp/lpd_$where" "$TRAIN_PARAMS" "${common[@]}" --optimizer=momentum \
    --batch_size=4 --num_gpus=2 --variable_update=parameter_server \
    --local_parameter_device=$where >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "--local_parameter_device=$where"; }
  grep -q "parameters in host memory" "$tmp/out" || { cat "$tmp/out"; fail "$where: not in host memory"; }
  ! grep -qi "warn" "$tmp/out" || { cat "$tmp/out"; fail "$where: a warning for tf's soft placement"; }
done
"$PARAMS_COMPARE" 0 "$tmp/lpd_cpu.0.0" "$tmp/lpd_gpu.0.0" || fail "--local_parameter_device=gpu differs from cpu"
# One process has nothing to be asynchronous with: the same training as synchronous.
CNNB_PARAMS_OUT="$tmp/sync" "$TRAIN_PARAMS" "${common[@]}" --optimizer=momentum --batch_size=4 \
  --num_gpus=2 --variable_update=parameter_server >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "sync"; }
CNNB_PARAMS_OUT="$tmp/async" "$TRAIN_PARAMS" "${common[@]}" --optimizer=momentum --batch_size=4 \
  --num_gpus=2 --variable_update=parameter_server --cross_replica_sync=false >"$tmp/out" 2>&1 \
  || { cat "$tmp/out"; fail "async in one process"; }
grep -q "cross_replica_sync=false has no effect here: one process, nothing to be asynchronous with" "$tmp/out" || { cat "$tmp/out"; fail "async note"; }
"$PARAMS_COMPARE" 0 "$tmp/sync.0.0" "$tmp/async.0.0" || fail "async in one process differs from sync"
echo "PASS: parameter_server matches one replica of the whole batch (2 and 4 replicas; momentum, sgd, rmsprop)"
