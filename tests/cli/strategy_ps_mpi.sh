#!/usr/bin/env bash
# --variable_update=parameter_server across real processes (mpirun on this host): with 1
# and 2 PS ranks, 2 ranks x batch b and 2 ranks x 2 replicas x batch b reach the same
# parameters after K steps as 1 process x the whole batch (the `sequence` fixture makes
# the data match), on every rank and replica; only rank 0 prints the report and its
# total counts every rank. Tolerance as strategy_parameter_server.sh (fp32 reassociation).
# Asynchronous mode and mismatched ranks are checked too.
set -euo pipefail
: "${TRAIN_PARAMS:?}" "${PARAMS_COMPARE:?}" "${CNNB_BUILD_DIR:?}" "${CNNB_SOURCE_DIR:?}"
source "$CNNB_SOURCE_DIR/tests/support/mpi.sh"
mpi_require parameter_server
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CNNB_PLUGIN_PATH="$CNNB_BUILD_DIR/fixtures/data"
common=(--model=lenet --datasource=sequence --num_batches=4 --num_warmup_batches=0
        --num_intra_threads=1 --optimizer=momentum --init_learning_rate=0.05 --weight_decay=1e-4
        --collective_timeout_s=60)
fail() { echo "FAIL: $*"; exit 1; }

CNNB_PARAMS_OUT="$tmp/one" "$TRAIN_PARAMS" "${common[@]}" --batch_size=8 >"$tmp/out" 2>&1 \
  || { cat "$tmp/out"; fail "1 process"; }
CNNB_PARAMS_OUT="$tmp/untrained" "$TRAIN_PARAMS" "${common[@]}" --batch_size=8 \
  --init_learning_rate=1e-30 >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "untrained"; }

# ranks x replicas x batch, num_ps_ranks. The report (stdout) and the logs (stderr) go to
# files of their own: mpirun forwards every rank's two streams, and in one file the
# report's lines would share it with the logs' arrival order.
for layout in "2 1 4 1" "2 1 4 2" "2 2 2 1" "4 1 2 2"; do
  read -r np replicas batch num_ps <<<"$layout"
  name="np${np}x${replicas}ps${num_ps}"
  show() { cat "$tmp/$name.out" "$tmp/$name.err"; }
  mpi_run_bounded 300 "$np" -x CNNB_PLUGIN_PATH -x CNNB_PARAMS_OUT="$tmp/$name" "$TRAIN_PARAMS" \
    "${common[@]}" --batch_size=$batch --num_gpus=$replicas --variable_update=parameter_server \
    --num_ps_ranks=$num_ps >"$tmp/$name.out" 2>"$tmp/$name.err" || { show; fail "$name"; }
  files=("$tmp/$name".*.*)
  [ ${#files[@]} -eq $((np * replicas)) ] || fail "$name: ${#files[@]} parameter files, want $((np * replicas))"
  "$PARAMS_COMPARE" 1e-5 "$tmp/one.0.0" "${files[@]}" || fail "$name vs 1 process x 8"
  [ "$(grep -c '^total images/sec' "$tmp/$name.out")" -eq 1 ] || { show; fail "$name: one report"; }
  grep -q "^total images/sec: [0-9.]* ($np ranks: " "$tmp/$name.out" || { show; fail "$name: total over ranks"; }
  grep -q "^Batch size:  8 global" "$tmp/$name.out" || { show; fail "$name: global batch"; }
  grep -q "^\[rank 1\] " "$tmp/$name.err" || { show; fail "$name: rank-tagged logs"; }
done
# Asynchronous (--cross_replica_sync=false): no rank waits for another; each PS rank's
# server applies every rank's push of every step (warm-up included) as it arrives. The
# result depends on the arrival order, so what is checked is that every push was applied
# once, the ranks finish, and the weights stay finite and moved.
for layout in "2 1" "3 2"; do
  read -r np num_ps <<<"$layout"
  name="async_np${np}ps${num_ps}"
  mpi_run_bounded 300 "$np" -x CNNB_PLUGIN_PATH -x CNNB_PARAMS_OUT="$tmp/$name" "$TRAIN_PARAMS" \
    "${common[@]}" --batch_size=4 --num_warmup_batches=1 --variable_update=parameter_server \
    --num_ps_ranks=$num_ps --cross_replica_sync=false >"$tmp/$name.out" 2>&1 \
    || { cat "$tmp/$name.out"; fail "$name"; }
  for ((p = 0; p < num_ps; p++)); do
    grep -qF "[rank $p] parameter_server: parameter server $p: applied $((np * 5)) pushes from $np ranks" \
      "$tmp/$name.out" || { cat "$tmp/$name.out"; fail "$name: PS $p did not apply $((np * 5)) pushes"; }
  done
  # The ranks pulled at different moments, but every value is finite and differs from a
  # run that never trained (1e-5 tolerance: they must NOT all match).
  for f in "$tmp/$name".*.*; do  # a file equals itself unless it holds inf or NaN
    "$PARAMS_COMPARE" 0 "$f" "$f" >/dev/null || fail "$name: $f holds non-finite weights"
  done
  ! "$PARAMS_COMPARE" 1e-9 "$tmp/$name.0.0" "$tmp/untrained.0.0" >/dev/null 2>&1 \
    || fail "$name: the weights did not move"
done

# Ranks started with different flags are refused on every rank before anything is
# exchanged, naming the value that differs and who holds it.
set +e
mpi_run_bounded 120 2 bash -c 'b=4; [ "$OMPI_COMM_WORLD_RANK" = 1 ] && b=8; exec "$0" "$@" --batch_size=$b' \
  "$CNNBENCH" --model=lenet --num_batches=2 --num_intra_threads=1 \
  --variable_update=parameter_server >"$tmp/mismatch.out" 2>&1
code=$?
set -e
[ $code -ne 0 ] || { cat "$tmp/mismatch.out"; fail "mismatched batch sizes were accepted"; }
for r in 0 1; do
  grep -qF "[rank $r] ranks disagree on the run: --batch_size is 4 on rank 0, 8 on rank 1" "$tmp/mismatch.out" \
    || { cat "$tmp/mismatch.out"; fail "rank $r does not name the mismatch"; }
done
! grep -q "^Step" "$tmp/mismatch.out" || fail "mismatched ranks trained"
echo "PASS: parameter_server across 2 and 4 ranks (1 and 2 PS ranks, 2 replicas per rank) matches one process; asynchronous mode applies every push once"
