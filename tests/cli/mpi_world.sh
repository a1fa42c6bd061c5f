#!/usr/bin/env bash
# The MPI layer every multi-process strategy shares (plugins/strategies/common/mpi_world.c),
# driven directly by tests/tools/mpi_world_check.c:
# - built without MPI: a world of one works, and a launcher's environment is refused
#   with a message saying the plugin was built without MPI;
# - one process without mpirun: a world of one, no MPI;
# - mpirun -np 2, 3, 4: allreduce (fp32, bf16, fp16; flat and hierarchical), bcast,
#   allgather, reduce and barrier give what each rank computes for itself, whole and split
#   into small MPI calls, and every rank holds the same bits; on this one machine every
#   rank is on one node (the hierarchical allreduce is a reduce and a broadcast);
# - the ranks regrouped into "nodes" of 2 (mpi_world_set_ranks_per_node: 4 ranks as 2 x 2,
#   3 ranks as 2 + 1), so the hierarchical allreduce's step across the nodes' leaders
#   runs too: the same checks, and each rank's local rank and the node count as grouped;
# - a rank that stops (SIGSTOP) in an allreduce of 3: both others fail within the timeout
#   plus the probe window, naming exactly that rank, and nothing is left running;
# - the same in the hierarchical allreduce of 2 x 2 "nodes", for a non-leader (rank 3)
#   and a leader (rank 2): the three others name it, whether they waited within their
#   node, across the leaders or for the broadcast.
set -euo pipefail
: "${MPI_WORLD_CHECK:?}" "${MPI_WORLD_CHECK_NOMPI:?}" "${CNNB_SOURCE_DIR:?}"
source "$CNNB_SOURCE_DIR/tests/support/mpi.sh"
fail() { echo "FAIL: $*"; exit 1; }

"$MPI_WORLD_CHECK_NOMPI" >/dev/null || fail "the no-MPI build's world of one"
rc=0
out=$(OMPI_COMM_WORLD_SIZE=2 "$MPI_WORLD_CHECK_NOMPI" 2>&1) || rc=$?
[ "$rc" = 4 ] && grep -q "this plugin was built without MPI" <<<"$out" \
  || fail "the no-MPI build under a launcher's environment exited $rc: $out"
echo "ok: built without MPI: $out"

"$MPI_WORLD_CHECK" | grep -qx "\[rank 0 of 1, local 0 of 1, 1 nodes\] all checks passed" \
  || fail "world of one"
echo "ok: one process without mpirun"

mpi_require horovod   # horovod is built exactly when MPI is: the tool has MPI too
for np in 2 3 4; do
  out=$(mpi_run_bounded 300 "$np" "$MPI_WORLD_CHECK" 2>&1) || fail "mpirun -np $np: $out"
  passed=$(grep -c "all checks passed" <<<"$out" || true)
  [ "$passed" = "$np" ] || fail "mpirun -np $np: $passed of $np ranks passed: $out"
  echo "ok: mpirun -np $np"
done
for np in 3 4; do
  out=$(mpi_run_bounded 300 "$np" "$MPI_WORLD_CHECK" --ranks-per-node 2 2>&1) \
    || fail "mpirun -np $np, nodes of 2: $out"
  passed=$(grep -c ", 2 nodes\] all checks passed" <<<"$out" || true)
  [ "$passed" = "$np" ] || fail "mpirun -np $np, nodes of 2: $passed of $np ranks passed: $out"
  echo "ok: mpirun -np $np in nodes of 2"
done

# Timeout 3 s, probe window min(3 s, timeout): the live ranks end after about 6 s.
start=$SECONDS
rc=0
out=$(mpi_run_bounded 120 3 "$MPI_WORLD_CHECK" --stop-rank 1 --timeout 3 2>&1) || rc=$?
took=$((SECONDS - start))
named=$(grep -c "^\[rank [02]\] after .*: rank 1 stopped answering: no reply within 3 s while all-reducing bucket 1 of step 1" <<<"$out" || true)
[ "$named" = 2 ] || fail "ranks 0 and 2 did not both name rank 1 (exit $rc): $out"
grep -q "FAIL" <<<"$out" && fail "$out"
[ "$rc" != 0 ] || fail "the job with a stopped rank exited 0"
[ "$took" -le 60 ] || fail "the job with a stopped rank took $took s"
for _ in 1 2 3 4 5 6 7 8 9 10; do [ -z "$(mpi_pids)" ] && break; sleep 1; done
[ -z "$(mpi_pids)" ] || fail "processes left behind: $(mpi_pids | tr '\n' ' ')"
echo "ok: stopped rank 1 named by ranks 0 and 2 in $took s; nothing left running"

# Hierarchical, 2 x 2 "nodes": rank 3 (not a leader: its leader, rank 2, waits for it within
# the node, rank 0 across the leaders, rank 1 for its leader's broadcast) and rank 2 (a
# leader). Each live rank must name exactly the stopped one.
for victim in 3 2; do
  start=$SECONDS
  rc=0
  out=$(mpi_run_bounded 120 4 "$MPI_WORLD_CHECK" --ranks-per-node 2 --stop-rank $victim \
          --hierarchical --timeout 3 2>&1) || rc=$?
  took=$((SECONDS - start))
  named=$(grep -c "^\[rank [0-3]\] after .*: rank $victim stopped answering: no reply within 3 s while .* bucket 1 of step 1" <<<"$out" || true)
  [ "$named" = 3 ] || fail "hierarchical: the 3 live ranks did not all name rank $victim (exit $rc): $out"
  grep -q "FAIL" <<<"$out" && fail "$out"
  [ "$rc" != 0 ] || fail "hierarchical: the job with a stopped rank exited 0"
  [ "$took" -le 60 ] || fail "hierarchical: the job with a stopped rank took $took s"
  for _ in 1 2 3 4 5 6 7 8 9 10; do [ -z "$(mpi_pids)" ] && break; sleep 1; done
  [ -z "$(mpi_pids)" ] || fail "processes left behind: $(mpi_pids | tr '\n' ' ')"
  echo "ok: hierarchical, stopped rank $victim named by the 3 others in $took s:" \
    "$(grep -o "while [a-z -]* bucket" <<<"$out" | sort | uniq -c | tr -s ' ' | tr '\n' ';')"
done
