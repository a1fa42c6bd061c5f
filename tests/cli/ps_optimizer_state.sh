#!/usr/bin/env bash
# The parameter server's optimizer slots for checkpoints (CNNB_EXT_STRATEGY_OPTIMIZER_STATE,
# sdk/include/cnnb/strategy.h), driven by tests/tools/ps_optimizer_state_check.c on real
# cpu devices: after a few updates get_slot gives every rank the whole slot, bit for bit
# cnnb_update_reference's; set_slot (and parameters uploaded before broadcast_params)
# resume training exactly where the reference does; refusals. In one process for every
# rule, then under mpirun with 1 and 2 PS ranks (shards gathered from and restored to
# the right ranks), synchronous and asynchronous.
set -euo pipefail
: "${PS_OPTIMIZER_STATE_CHECK:?}" "${CNNB_PLUGIN_DIR:?}" "${CNNB_SOURCE_DIR:?}"
for p in device_cpu strategy_parameter_server; do
  [ -e "$CNNB_PLUGIN_DIR/libcnnb_$p.so" ] || { echo "SKIP: plugin $p not built"; exit 77; }
done
source "$CNNB_SOURCE_DIR/tests/support/mpi.sh"
tmp=$(mktemp -d)
trap 'mpi_cleanup; rm -rf "$tmp"' EXIT
check=("$PS_OPTIMIZER_STATE_CHECK" --collective_timeout_s=30)
fail() { echo "FAIL: $*"; exit 1; }

# Its own words for what it checked, on every rank: N times "all checks passed" (counted as
# matches, not lines: mpirun forwards the ranks' output, and two ranks' lines can join).
expect_passed() {
  local out=$1 want=$2 name=$3
  [ "$(grep -o ': all checks passed' "$out" | wc -l)" -eq "$want" ] || { cat "$out"; fail "$name"; }
}

for optimizer in sgd momentum rmsprop adam; do
  for restore in --norestore --restore; do
    name="$optimizer$restore"
    timeout -s KILL 60 "${check[@]}" --optimizer=$optimizer --num_gpus=2 $restore \
      >"$tmp/$name.out" 2>&1 || { cat "$tmp/$name.out"; fail "$name"; }
    expect_passed "$tmp/$name.out" 1 "$name"
  done
done
# Slots restored for one rule, trained with another: apply_update refuses, naming both.
timeout -s KILL 60 "${check[@]}" --optimizer=momentum --restore --wrong_rule=adam \
  >"$tmp/wrong.out" 2>&1 || { cat "$tmp/wrong.out"; fail "wrong rule"; }
expect_passed "$tmp/wrong.out" 1 "wrong rule"

command -v mpirun >/dev/null 2>&1 || { echo "SKIP: one process passed; mpirun not found"; exit 77; }
# ranks, replicas, PS ranks, synchronous, optimizer: one run checks fresh slots, one resumes
# (and a rank passing other values is refused on every rank, naming it).
for layout in "2 1 2 true momentum" "2 2 1 true adam" "3 1 2 true rmsprop" \
              "2 1 2 false adam" "3 1 2 false momentum"; do
  read -r np replicas num_ps sync optimizer <<<"$layout"
  for restore in --norestore --restore; do
    name="np${np}x${replicas}ps${num_ps}sync${sync}_$optimizer$restore"
    mpi_run_bounded 120 "$np" "${check[@]}" --optimizer=$optimizer --num_gpus=$replicas \
      --num_ps_ranks=$num_ps --cross_replica_sync=$sync $restore >"$tmp/$name.out" 2>&1 \
      || { cat "$tmp/$name.out"; fail "$name"; }
    expect_passed "$tmp/$name.out" "$np" "$name"
  done
done
echo "PASS: parameter_server's optimizer slots saved and restored in 1 process and across 2 and 3 ranks (1 and 2 PS ranks, synchronous and asynchronous)"
