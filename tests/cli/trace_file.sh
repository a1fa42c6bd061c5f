#!/usr/bin/env bash
# --trace_file: a Chrome trace-event JSON of the first --trace_steps timed steps, checked
# by tests/tools/trace_check (jansson; see its header for each rule):
# - one process: valid JSON, every event well formed, B/E paired, no partial overlap on a
#   track; exactly --trace_steps "step N" spans; every layer of the model (--model_info's
#   table) has a forward event, and when training every layer with parameters (and the
#   loss) a backward event, on the replica's track within each traced step; the step
#   track's events cover >= 90% of a step span (the best-covered: see trace_check.c);
#   pid 0, process "rank 0";
# - forward only (--forward_only) the same without backward, its phase named "forward"
#   and no optimizer update; the parameter server's
#   sum, push and update on its tracks; two replicas (replicated)
#   each on its own track, and the gradient buckets' all-reduces on per-bucket tracks;
# - mpirun -np 2 --variable_update=horovod: FILE.rank0.json and FILE.rank1.json, pids 0
#   and 1, allreduce events on several per-bucket tracks;
# - a path that cannot be created: an error naming it, exit != 0, before any step;
# - --tfprof_file (tf's flag): 10 steps traced and the table of op kinds printed.
# The checker itself is shown to fail on a trace with a layer's events removed, and on
# one whose steps lost their long phases.
set -euo pipefail
: "${CNNBENCH:?}" "${TRACE_CHECK:?}" "${CNNB_SOURCE_DIR:?}"
tmp=$(mktemp -d)
cleanup() { if declare -F mpi_cleanup >/dev/null; then mpi_cleanup; fi; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

# Small and quick: 2 warm-up steps, 4 timed, 2 traced.
run=(--model=lenet --batch_size=4 --num_intra_threads=1 --num_warmup_batches=2 --num_batches=4
     --display_every=1)
# The model's layers: "name op params" from --model_info's table (rows whose shape is [..]).
"$CNNBENCH" --model=lenet --model_info | awk '$3 ~ /^\[/ {print $1, $2, $(NF-1)}' > "$tmp/layers"
[ "$(wc -l < "$tmp/layers")" -ge 10 ] || fail "could not read lenet's layers: $(cat "$tmp/layers")"

"$CNNBENCH" "${run[@]}" --trace_steps=2 --trace_file="$tmp/train.json" >"$tmp/train.out" 2>"$tmp/train.err" \
  || fail "training with --trace_file: $(cat "$tmp/train.err")"
"$TRACE_CHECK" "$tmp/train.json" --pid=0 --steps=2 --nodes="$tmp/layers" --training --coverage=0.9 \
  || fail "training trace"
grep -q "^total images/sec:" "$tmp/train.out" || fail "no report with --trace_file"
echo "ok: training trace, 2 steps, every layer forward and backward"

# The checker catches what it claims to: the same trace without conv1's backward fails.
grep -q '"name":"conv1/conv2d","ph":"X"' "$tmp/train.json" || fail "unexpected trace layout"
sed 's/"name":"conv1\/conv2d","ph":"X"\([^}]*\)"cat":"backward"/"name":"renamed","ph":"X"\1"cat":"backward"/g' \
  "$tmp/train.json" > "$tmp/broken.json"
! "$TRACE_CHECK" "$tmp/broken.json" --pid=0 --steps=2 --nodes="$tmp/layers" --training >"$tmp/broken.out" \
  || fail "trace_check accepted a trace without conv1's backward"
grep -q "conv1/conv2d' has no backward event" "$tmp/broken.out" || fail "checker said: $(cat "$tmp/broken.out")"
! "$TRACE_CHECK" "$tmp/train.json" --steps=3 >/dev/null || fail "trace_check accepted 2 step spans as 3"
# ...and phases missing from the step track: without the long ones (which is longest
# depends on the build: a sanitizer slows the reference update most) the data wait and
# the synchronizes cover a small part of each step.
sed -E -e 's/\{"name":"forward and backward"[^{}]*\{[^{}]*\}\},?//g' \
  -e 's/\{"name":"(read metrics|optimizer update)"[^{}]*\},?//g' "$tmp/train.json" > "$tmp/hole.json"
! grep -q '"forward and backward"\|"read metrics"\|"optimizer update"' "$tmp/hole.json" \
  || fail "could not remove the long phases"
! "$TRACE_CHECK" "$tmp/hole.json" --pid=0 --steps=2 --coverage=0.9 >"$tmp/hole.out" \
  || fail "trace_check accepted steps without their long phases"
grep -q "step track's events cover" "$tmp/hole.out" || fail "checker said: $(cat "$tmp/hole.out")"
echo "ok: the checker refuses a missing backward, a wrong step count and a hole in the steps"

"$CNNBENCH" "${run[@]}" --forward_only --trace_steps=3 --trace_file="$tmp/fwd.json" >/dev/null 2>"$tmp/fwd.err" \
  || fail "--forward_only with --trace_file: $(cat "$tmp/fwd.err")"
"$TRACE_CHECK" "$tmp/fwd.json" --pid=0 --steps=3 --nodes="$tmp/layers" --coverage=0.9 || fail "forward-only trace"
! grep -q '"cat":"backward"' "$tmp/fwd.json" || fail "backward events in a forward-only trace"
grep -q '"name":"forward","ph":"X"' "$tmp/fwd.json" || fail "no 'forward' phase on the step track"
! grep -q '"forward and backward"\|"optimizer update"' "$tmp/fwd.json" || fail "training phases in a forward-only trace"
echo "ok: forward-only trace, 3 steps"

# Two replicas in one process, 0.5 MB buckets: lenet's gradients make three.
"$CNNBENCH" "${run[@]}" --num_gpus=2 --variable_update=replicated --gradient_bucket_mb=0.5 \
  --trace_steps=2 --trace_file="$tmp/repl.json" >/dev/null 2>"$tmp/repl.err" \
  || fail "replicated with --trace_file: $(cat "$tmp/repl.err")"
"$TRACE_CHECK" "$tmp/repl.json" --pid=0 --steps=2 --nodes="$tmp/layers" --training --coverage=0.9 \
  --tracks="allreduce bucket:3" || fail "replicated trace"
for r in 0 1; do grep -q "\"name\":\"replica $r\"" "$tmp/repl.json" || fail "no track of replica $r"; done
echo "ok: two replicas on their own tracks, three bucket all-reduces on theirs"

# The parameter server exchanges on the step thread, in finish_step and finish_update.
"$CNNBENCH" "${run[@]}" --num_gpus=2 --variable_update=parameter_server --trace_steps=2 \
  --trace_file="$tmp/ps.json" >/dev/null 2>"$tmp/ps.err" || fail "parameter_server with --trace_file: $(cat "$tmp/ps.err")"
"$TRACE_CHECK" "$tmp/ps.json" --pid=0 --steps=2 --nodes="$tmp/layers" --training --coverage=0.9 \
  --tracks="push to parameter server:1" || fail "parameter_server trace"
for what in "sum of replicas" "variables to replicas"; do
  grep -q "\"name\":\"$what\"" "$tmp/ps.json" || fail "no '$what' in the parameter_server trace"
done
echo "ok: the parameter server's sum, push and update on their tracks (one process: no pull)"

# --tfprof_file (tf's): its first 10 timed steps traced, then a table of op kinds: every
# conv2d and dense layer run once a step (lenet: 2 of each), shares summing to 100%.
"$CNNBENCH" "${run[@]}" --num_batches=12 --display_every=100 --tfprof_file="$tmp/prof.json" \
  >"$tmp/prof.out" 2>"$tmp/prof.err" || fail "--tfprof_file: $(cat "$tmp/prof.err")"
"$TRACE_CHECK" "$tmp/prof.json" --pid=0 --steps=10 --nodes="$tmp/layers" --training --coverage=0.9 \
  || fail "--tfprof_file's trace"
grep -q "^Top 20 ops by time, per step of the 10 traced" "$tmp/prof.out" || fail "no table: $(cat "$tmp/prof.out")"
table=$(sed -n '/^Top 20 ops/,$p' "$tmp/prof.out" | tail -n +3)
rows=$(echo "$table" | wc -l)
[ "$rows" -ge 6 ] && [ "$rows" -le 20 ] || fail "$rows rows in the op table"
for op in conv2d dense; do
  echo "$table" | awk -v op=$op '$1 == op && $2 == "2.0" {found = 1} END {exit !found}' \
    || fail "$op: not 2 calls a step: $table"
done
echo "$table" | awk '{sub("%", "", $NF); s += $NF} END {exit !(s > 99 && s < 100.5)}' \
  || fail "the shares do not sum to 100%: $table"
! echo "$table" | grep -q "^step \|^forward and backward" || fail "spans counted as work: $table"
! "$CNNBENCH" "${run[@]}" --tfprof_file="$tmp/a.json" --trace_file="$tmp/b.json" >/dev/null 2>"$tmp/both.err" \
  || fail "--tfprof_file with --trace_file accepted"
grep -q "give one" "$tmp/both.err" || fail "both files: $(cat "$tmp/both.err")"
! "$CNNBENCH" "${run[@]}" --tfprof_file="$tmp/no/such/p.json" >/dev/null 2>"$tmp/nodir.err" \
  || fail "--tfprof_file in a missing directory accepted"
grep -q -- "--tfprof_file=$tmp/no/such/p.json: cannot create" "$tmp/nodir.err" || fail "message: $(cat "$tmp/nodir.err")"
echo "ok: --tfprof_file: 10 steps traced, the op table counts each layer once a step"

# A path that cannot be created: refused before the first step.
! "$CNNBENCH" "${run[@]}" --trace_file="$tmp/no/such/dir/t.json" >"$tmp/bad.out" 2>"$tmp/bad.err" \
  || fail "a trace file in a missing directory was accepted"
grep -q -- "--trace_file=$tmp/no/such/dir/t.json: cannot create" "$tmp/bad.err" || fail "message: $(cat "$tmp/bad.err")"
! grep -q "Running warm up" "$tmp/bad.err" || fail "steps ran before the trace file was refused"
echo "ok: a bad path is refused by name before any step"

# Two ranks: one file each, named by rank, each its own process; horovod's fused groups
# of 0.5 MB buckets on their own tracks (no fusion: each bucket alone).
source "$CNNB_SOURCE_DIR/tests/support/mpi.sh"
if ! (mpi_require horovod) >/dev/null 2>&1; then
  echo "SKIP: mpirun -np 2 part (no MPI or no horovod plugin); the rest passed"
  exit 0
fi
mpi_run_bounded 300 2 "$CNNBENCH" "${run[@]}" --variable_update=horovod --gradient_bucket_mb=0.5 \
  --horovod_fusion_threshold=0 --trace_steps=2 --trace_file="$tmp/hvd.json" >"$tmp/hvd.out" 2>"$tmp/hvd.err" \
  || fail "mpirun -np 2 with --trace_file: $(cat "$tmp/hvd.out" "$tmp/hvd.err")"
[ ! -e "$tmp/hvd.json" ] || fail "under two ranks, FILE itself was written (want FILE.rankR.json)"
for r in 0 1; do
  "$TRACE_CHECK" "$tmp/hvd.rank$r.json" --pid=$r --steps=2 --nodes="$tmp/layers" --training \
    --coverage=0.9 --tracks="allreduce bucket:3" || fail "rank $r's trace"
done
echo "ok: mpirun -np 2: a trace per rank, pid = rank, bucket all-reduces on their tracks"
