#!/usr/bin/env bash
# Several hosts on one machine (issue 8): two network namespaces joined through a bridge,
# each link shaped to 1 Gbit/s with tc, and real `mpirun` jobs launched across them
# (tests/support/netns.sh builds and removes all of it).
#
#  1. The harness: `mpirun -np 2` puts rank 0 in the first namespace and rank 1 in the
#     second (each rank prints its host name and `ip netns identify`).
#  2. The shaping is in effect: an MPI_Allreduce of 32 MiB (bench/allreduce_bench mpi)
#     crosses the shapers (their sent-bytes counters grow by at least the bytes it must
#     move), sums exactly, and cannot beat the rate: 32 MiB at 1 Gbit/s takes at least
#     268 ms, so a bus bandwidth above 1.15 x 0.125 GB/s means the traffic was not shaped
#     (unshaped, this machine's veths carried 0.3-1.3 GB/s). One-sided: a slow machine passes.
#  3. cnnbench across the namespaces with --variable_update=independent (each process
#     trains alone: proves that the plugins, the data and the environment reach ranks in
#     other namespaces).
#  4. The MPI strategies across the namespaces, each only when its plugin is built
#     (libcnnb_strategy_<name>.so in $CNNB_PLUGIN_DIR; the test says which it skipped):
#     horovod, parameter_server (rank 0 holds the variables, both ranks train) and
#     replicated (its MPI all-reduce across ranks), 2 ranks x 1 replica, lenet at batch 4
#     on the `sequence` fixture for 3 steps. Each run must succeed with its ranks in
#     different namespaces, and its gradient traffic must cross the shaped links (the
#     counters grow by at least one copy of the parameters, 8.7 MB). Every rank's final
#     parameters must equal those of one process training 1 replica at batch 8 on the same
#     global examples (the mean gradient every strategy promises, here over real TCP
#     between hosts), within 1e-5 x (1 + |w|): the runs add the same fp32 gradients in a
#     different order (two half-batch means averaged vs one batch), a few ulps per step;
#     the strategies' own equivalence tests use the same bound.
#  5. horovod with --horovod_hierarchical_allreduce, 2 ranks on each host: every rank sees
#     2 nodes, and the parameters are again those of 1 process at the whole batch.
# Each rank writes its output to its own file (tmp/ranks/JOB.<rank>): mpirun forwards the
# ranks' output in chunks, and a line of one rank was seen glued to another's.
# Every mpirun is bounded, so a hang fails the test instead of holding CI.
set -uo pipefail
: "${CNNBENCH:?}" "${CNNB_BUILD_DIR:?}" "${CNNB_PLUGIN_DIR:?}"
source "$(dirname "$0")/../support/netns.sh"
netns_require
# Under the sanitizers OpenMPI's components (dlopen'd, closed again by MPI_Finalize) leave
# ~120 KB that LeakSanitizer reports with frames in unloaded modules, which no suppression
# can name: these jobs check addresses and undefined behaviour, not leaks (as
# cli_strategy_replicated's mpirun runs).
[ "${CNNB_SANITIZE:-0}" != 1 ] || export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"

RATE=1gbit
RATE_GBYTES=0.125
netns_up 2 "$RATE" || { echo "FAIL: could not build the namespaces"; exit 1; }
echo "hosts: ${NETNS_NAMES[*]} at ${NETNS_ADDRS[*]} ($NETNS_SUBNET), links shaped at $RATE"
tmp=$NETNS_DIR
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

cat > "$tmp/where" <<'EOF'
#!/bin/sh
# Says where this rank runs, then becomes the command, its output in $RANK_LOG.<rank>:
# mpirun forwards the ranks' output in chunks, so two ranks' lines can share a line.
rank=${OMPI_COMM_WORLD_RANK:-x}
exec > "$RANK_LOG.$rank" 2>&1
echo "where: rank $rank host $(hostname) netns $(ip netns identify)"
exec "$@"
EOF
chmod +x "$tmp/where"
mkdir "$tmp/ranks"
# run_ranks NAME SECS NP CMD...: CMD on NP ranks across the hosts, bounded, each rank
# through the wrapper above (output in $tmp/ranks/NAME.<rank>, mpirun's in $tmp/NAME.log).
run_ranks() {
  local name=$1 secs=$2 np=$3
  shift 3
  RANK_LOG="$tmp/ranks/$name" netns_mpirun_bounded "$secs" "$np" "$tmp/where" "$@" \
    > "$tmp/$name.log" 2>&1
}
# show NAME: everything the job printed, for a failure's message.
show() {
  local f
  cat "$tmp/$1.log"
  for f in "$tmp/ranks/$1".*; do [ -e "$f" ] && { echo "--- rank ${f##*.}:"; cat "$f"; }; done
}
# where NAME: "RANK HOSTNAME NETNS" per rank of the job.
where() {
  cat "$tmp/ranks/$1".* 2>/dev/null \
    | sed -n 's/^where: rank \([0-9]*\) host \([^ ]*\) netns \([^ ]*\)$/\1 \2 \3/p' | sort -n
}
# expect_spread NAME: rank r ran in host r's namespace, under its host name, r = 0, 1.
expect_spread() {
  local got want
  got=$(where "$1" | tr '\n' ' ')
  want="0 ${NETNS_NAMES[0]} ${NETNS_NAMES[0]} 1 ${NETNS_NAMES[1]} ${NETNS_NAMES[1]} "
  [ "$got" = "$want" ] || { fail "$1: ranks ran in '$got', expected '$want'"; return 1; }
}

# --- 1. the harness ---------------------------------------------------------------------
if run_ranks hello 60 2 true; then
  expect_spread hello && echo "ok: ranks spread: $(where hello | tr '\n' ' ')"
else
  fail "mpirun across the namespaces failed:"; show hello
fi

# --- 2. the shaping ---------------------------------------------------------------------
tc qdisc show dev "${NETNS_VETHS[0]}r" | grep -q "tbf .*rate 1Gbit" \
  || fail "no 1 Gbit/s tbf on ${NETNS_VETHS[0]}r: $(tc qdisc show dev "${NETNS_VETHS[0]}r")"
allreduce="$CNNB_BUILD_DIR/bin/allreduce_bench"
if [ -x "$allreduce" ]; then
  before=$(netns_sent_bytes)
  bytes=$((32 << 20))
  if netns_mpirun_bounded 120 2 "$allreduce" mpi --min_bytes=$bytes --max_bytes=$bytes \
       > "$tmp/allreduce.log" 2>&1; then
    sent=$(( $(netns_sent_bytes) - before ))
    failed_before=$failures
    # size count type redop time algbw busbw #wrong
    read -r busbw wrong < <(awk -v b=$bytes '$1 == b {print $7, $8}' "$tmp/allreduce.log")
    [ "${wrong:-x}" = 0 ] || fail "the allreduce across the namespaces got ${wrong:-?} elements wrong"
    # At least 3 calls (a checked one, 2 warm-up, then the timed ones), each sending at
    # least the whole buffer between the hosts
    (( sent >= 3 * bytes )) || fail "the shapers counted $sent bytes, less than the $((3 * bytes)) the allreduce moved"
    awk -v bw="${busbw:-x}" -v rate=$RATE_GBYTES 'BEGIN { exit !(bw == bw + 0 && bw <= 1.15 * rate) }' \
      || fail "allreduce bus bandwidth ${busbw:-?} GB/s beats the $RATE shaping ($RATE_GBYTES GB/s):"$'\n'"$(cat "$tmp/allreduce.log")"$'\n'"$(netns_qdiscs)"
    (( failures == failed_before )) \
      && echo "ok: 32 MiB allreduce at $busbw GB/s bus bandwidth over the $RATE links, sums exact; shapers sent $sent bytes"
  else
    fail "allreduce_bench mpi across the namespaces failed:"; cat "$tmp/allreduce.log"
  fi
else
  echo "note: $allreduce not built: shaping checked by the qdisc only"
fi

# --- 3. cnnbench, independent --------------------------------------------------------------
train=(--model=lenet --batch_size=4 --num_batches=3 --num_warmup_batches=0 --display_every=1
       --optimizer=momentum --init_learning_rate=0.01 --num_intra_threads=1)
if run_ranks independent 120 2 "$CNNBENCH" "${train[@]}" --variable_update=independent; then
  if ! expect_spread independent; then
    show independent
  elif [ "$(cat "$tmp/ranks/independent".* | grep -c "^total images/sec:")" -ne 2 ]; then
    fail "independent: not a report from each rank"; show independent
  else
    echo "ok: cnnbench --variable_update=independent ran in both namespaces"
  fi
else
  fail "cnnbench --variable_update=independent across the namespaces failed:"; show independent
fi

# --- 4. the MPI strategies -----------------------------------------------------------------
export OMP_WAIT_POLICY=passive   # 2 ranks x 1 thread on 2 shared cores: do not spin
seq_args=(--datasource=sequence --model=lenet --num_batches=3 --num_warmup_batches=0
          --optimizer=momentum --init_learning_rate=0.01 --num_intra_threads=1)
param_bytes=$(( $("$CNNBENCH" --model=lenet --model_info | sed -n 's/^Trainable parameters: //p') * 4 ))
reference=""
skipped=()
for strategy in horovod parameter_server replicated; do
  if [ ! -e "$CNNB_PLUGIN_DIR/libcnnb_strategy_$strategy.so" ]; then
    skipped+=("$strategy"); continue
  fi
  before=$(netns_sent_bytes)
  if CNNB_PLUGIN_PATH="$CNNB_BUILD_DIR/fixtures/data" CNNB_PARAMS_OUT="$tmp/$strategy" \
       run_ranks "$strategy" 180 2 "${TRAIN_PARAMS:?}" "${seq_args[@]}" --batch_size=4 \
       --variable_update="$strategy"; then
    sent=$(( $(netns_sent_bytes) - before ))
    failed_before=$failures
    expect_spread "$strategy" || show "$strategy"
    (( sent >= param_bytes )) \
      || fail "$strategy: only $sent bytes crossed the shaped links, less than one copy of the parameters ($param_bytes)"
    if [ -z "$reference" ]; then
      reference="$tmp/reference"
      CNNB_PLUGIN_PATH="$CNNB_BUILD_DIR/fixtures/data" CNNB_PARAMS_OUT="$reference" \
        "$TRAIN_PARAMS" "${seq_args[@]}" --batch_size=8 --variable_update=independent \
        > "$tmp/reference.log" 2>&1 || { fail "reference run failed"; cat "$tmp/reference.log"; }
    fi
    files=("$tmp/$strategy".*.*)
    [ "${#files[@]}" -eq 2 ] || fail "$strategy: expected 2 parameter files (rank 0, rank 1), got ${files[*]}"
    "${PARAMS_COMPARE:?}" 1e-5 "$reference.0.0" "${files[@]}" \
      || fail "$strategy: final parameters differ from 1 replica at batch 8"
    (( failures == failed_before )) \
      && echo "ok: $strategy across the namespaces, parameters as 1 process; $sent bytes through the shapers"
  else
    fail "$strategy across the namespaces failed:"; show "$strategy"
  fi
done
# Horovod's hierarchical allreduce with 2 ranks on each of the 2 hosts: within a host the
# ranks meet over TCP inside its namespace (the host's own address, not through the
# shaper), only the hosts' leaders cross the shaped link; the result is still 1 process
# of the whole batch (4 ranks x 2 = 8).
if [ -e "$CNNB_PLUGIN_DIR/libcnnb_strategy_horovod.so" ] && [ -n "$reference" ]; then
  if CNNB_PLUGIN_PATH="$CNNB_BUILD_DIR/fixtures/data" CNNB_PARAMS_OUT="$tmp/hierarchical" \
       run_ranks hierarchical 240 4 "${TRAIN_PARAMS:?}" "${seq_args[@]}" --batch_size=2 \
       --variable_update=horovod --horovod_hierarchical_allreduce; then
    failed_before=$failures
    [ "$(grep -l "hierarchical allreduce over 2 nodes" "$tmp/ranks/hierarchical".* | wc -l)" -eq 4 ] \
      || { fail "hierarchical: not every rank sees 2 nodes"; show hierarchical; }
    "${PARAMS_COMPARE:?}" 1e-5 "$reference.0.0" "$tmp/hierarchical".*.* \
      || fail "hierarchical: final parameters differ from 1 replica at batch 8"
    (( failures == failed_before )) && echo "ok: horovod --horovod_hierarchical_allreduce, 2 hosts x 2 ranks, parameters as 1 process"
  else
    fail "hierarchical horovod across the namespaces failed:"; show hierarchical
  fi
fi
((${#skipped[@]})) && echo "skipped (plugin not built in $CNNB_PLUGIN_DIR): ${skipped[*]}"

if ((failures)); then
  echo "--- links"; netns_qdiscs
  echo "FAIL: $failures check(s) failed"; exit 1
fi
echo "PASS"
