#!/usr/bin/env bash
# --cuda_graphs, the host's side, on the fixture device "fixture_graph" (the cpu device
# recording and replaying steps as a CUDA graph does; tests/fixtures/fixture_graph_device.c):
# - lenet on synthetic data, 2 warm-up + 8 timed steps: step 3 recorded, 8 steps through
#   the recording, every displayed loss equal to the same run without --cuda_graphs and
#   to the cpu device's;
# - without the flag nothing is recorded;
# - runs that cannot use it say why in a warning and train as usual: a device without the
#   extension (cpu), two replicas, a datasource whose batch changes, a model with dropout;
# - a recording that fails (FIXTURE_GRAPH_FAIL=call / end) is reported in a warning
#   naming the device's reason, and the run goes on through the calls, the same losses.
set -euo pipefail
: "${CNNBENCH:?}" "${CNNB_BUILD_DIR:?}"
device="$CNNB_BUILD_DIR/fixtures/devices/libfixture_graph_device.so"
[ -f "$device" ] || { echo "SKIP: the fixture_graph device is not built"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

common=(--model=lenet --batch_size=8 --num_intra_threads=1 --num_warmup_batches=2 --num_batches=8
        --display_every=1)
graph=(--plugin="$device" --device=fixture_graph)
# Runs cnnbench into $tmp/NAME.out / .err; it must succeed.
run() {
  local name=$1; shift
  "$CNNBENCH" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" || fail "$name: exit $?: $(tail -3 "$tmp/$name.err")"
}
# The loss column of the step lines.
losses() { awk '/images\/sec:/ && $1 ~ /^[0-9]+$/ {print $1, $NF}' "$tmp/$1.out"; }
counts() { grep -o 'fixture_graph: [0-9]* recordings, [0-9]* replays' "$tmp/$1.err" || true; }

run graphed "${common[@]}" "${graph[@]}" --cuda_graphs
run calls "${common[@]}" "${graph[@]}"
run cpu "${common[@]}"
[ "$(counts graphed)" = "fixture_graph: 1 recordings, 8 replays" ] \
  || fail "want step 3 recorded and 8 steps replayed, got '$(counts graphed)'"
grep -q -- "--cuda_graphs: steps 1 and 2 make their calls, step 3 is recorded" "$tmp/graphed.err" \
  || fail "no word of the recording: $(cat "$tmp/graphed.err")"
grep -qF -- "--cuda_graphs: 1 recording(s), 8 of 10 steps replayed" "$tmp/graphed.err" \
  || fail "no count of the replays: $(grep -- --cuda_graphs "$tmp/graphed.err")"
[ "$(counts calls)" = "fixture_graph: 0 recordings, 0 replays" ] \
  || fail "recorded without --cuda_graphs: '$(counts calls)'"
[ "$(losses graphed | wc -l)" = 8 ] || fail "want 8 step lines: $(cat "$tmp/graphed.out")"
diff <(losses graphed) <(losses calls) >/dev/null \
  || fail "losses through the recording differ from the calls': $(paste <(losses graphed) <(losses calls))"
diff <(losses graphed) <(losses cpu) >/dev/null \
  || fail "losses through the recording differ from the cpu device's"
echo "ok: step 3 recorded, 8 steps replayed, the same losses as the calls and the cpu device"

# Runs that cannot record: a warning saying why, the run as usual.
cannot() {
  local name=$1 want=$2; shift 2
  run "$name" "$@" --cuda_graphs
  grep -F -- "--cuda_graphs: steps make their calls as usual: $want" "$tmp/$name.err" >/dev/null \
    || fail "$name: no warning '$want': $(grep -i cuda_graphs "$tmp/$name.err" || cat "$tmp/$name.err")"
  [ "$(counts "$name" | grep -v ' 0 recordings, 0 replays' || true)" = "" ] \
    || fail "$name: recorded anyway: $(counts "$name")"
  grep -q "^total images/sec:" "$tmp/$name.out" || fail "$name: no report"
}
cannot cpu_device "the device cannot record a step" "${common[@]}"
cannot replicas "several replicas (--num_gpus) exchange gradients" "${common[@]}" "${graph[@]}" \
  --num_gpus=2 --variable_update=replicated
CNNB_PLUGIN_PATH="$CNNB_BUILD_DIR/fixtures/data" \
  cannot changing_batch "each step uploads a new batch" "${common[@]}" "${graph[@]}" \
  --datasource=sequence
cannot dropout "node 'dropout0' (dropout)" --model=mobilenet --image_size=32 --batch_size=2 \
  --num_intra_threads=1 --num_warmup_batches=0 --num_batches=1 "${graph[@]}"
grep -q "draws a new mask each step" "$tmp/dropout.err" || fail "dropout: the reason is not said"
echo "ok: the cpu device, two replicas, a changing batch and dropout each say why they make their calls"

# A recording the device cannot make: the run goes on through the calls.
for where in call end; do
  FIXTURE_GRAPH_FAIL=$where run "fail_$where" "${common[@]}" "${graph[@]}" --cuda_graphs
  grep -q -- "--cuda_graphs: recording step 3 failed (.*fixture_graph: .*); this and every later step make their calls" \
    "$tmp/fail_$where.err" || fail "$where: no warning: $(cat "$tmp/fail_$where.err")"
  [ "$(counts "fail_$where")" = "fixture_graph: 0 recordings, 0 replays" ] \
    || fail "$where: '$(counts "fail_$where")'"
  grep -qF -- "--cuda_graphs: 0 recording(s), 0 of 10 steps replayed" "$tmp/fail_$where.err" \
    || fail "$where: the count says otherwise: $(grep -- --cuda_graphs "$tmp/fail_$where.err")"
  diff <(losses "fail_$where") <(losses calls) >/dev/null || fail "$where: other losses than the calls'"
done
echo "ok: a failed recording is reported and the run trains through the calls"
