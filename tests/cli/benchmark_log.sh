#!/usr/bin/env bash
# --benchmark_log_dir=DIR (docs/checkpoints-and-logs.md, "Benchmark log"), checked by json_lines_check
# (tests/tools), which reads the JSON with jansson:
# - a training run writes DIR/benchmark_run.rank0.jsonl, creating DIR and its parents:
#   whole JSON lines, records run, step..., summary with the documented keys and types;
#   one step record per step line of the report (same steps), the summary's images/sec
#   equal to the printed total within its rounding; the command line and the flags as
#   given; the learning rate and loss scale of the steps;
# - --eval adds an eval record with the report's accuracy;
# - a run that fails after setup (a diverging loss) still ends its log with a summary
#   whose status is the error message;
# - a DIR that cannot be made (under a regular file) fails before any step, exit status
#   != 0, with a message naming it, and no report;
# - under mpirun -np 2 (horovod), each rank writes its own file with its rank in it;
# - rank 0 also writes tf_cnn_benchmarks' benchmark_run.log (one JSON object) and
#   metric.log (a line per metric: current_examples_per_sec and the accuracies per step
#   line, average_examples_per_sec at the end, --eval's eval_* metrics), metric.log
#   appended to by a second run as tf's logger does (cli/tensorboard.sh reads them with
#   Python's json and compares their values).
set -euo pipefail
: "${CNNBENCH:?}" "${JSON_LINES_CHECK:?}" "${CNNB_SOURCE_DIR:?}" "${CNNB_PLUGIN_DIR:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; for f in "$tmp"/*.out "$tmp"/*.err; do [ -e "$f" ] && { echo "--- $f"; cat "$f"; }; done; exit 1; }
common=(--model=trivial --batch_size=4 --num_warmup_batches=2 --num_intra_threads=1)

# 1. A training run of 7 steps, displayed at 1, 2, 4, 6 and 7, into a directory to create.
log=$tmp/logs/train
"$CNNBENCH" "${common[@]}" --num_batches=7 --display_every=2 --benchmark_log_dir="$log" \
  >"$tmp/train.out" 2>"$tmp/train.err" || fail "training with --benchmark_log_dir: exit $?"
[ "$(ls "$log" | tr '\n' ' ')" = "benchmark_run.log benchmark_run.rank0.jsonl metric.log " ] \
  || fail "want exactly benchmark_run.log benchmark_run.rank0.jsonl metric.log in $log, found: $(ls "$log")"
file=$log/benchmark_run.rank0.jsonl
"$JSON_LINES_CHECK" "$file" 0 "$tmp/train.out" || fail "the log does not match its schema or the report"
[ "$(grep -c '"record":"step"' "$file")" -eq 5 ] || fail "want 5 step records (steps 1 2 4 6 7)"
grep -q '"command_line":\["[^"]*cnnbench","--model=trivial",' "$file" || fail "the command line is not recorded as given"
grep -q '"flags_set":\[[^]]*"display_every"' "$file" || fail "display_every is not among the flags set"
grep -q '"num_batches":7,' "$file" || fail "num_batches=7 is not recorded"
grep -q '"learning_rate":0.005,"loss_scale":1.0,' "$file" || fail "the trivial model's learning rate 0.005 (shortest float) and loss scale 1 are not in the step records"
echo "ok: a training run's log: run, 5 steps, summary; total as printed"
# tf_cnn_benchmarks' files: Python json.dump's spacing, its keys.
[ "$(wc -l < "$log/benchmark_run.log")" -eq 1 ] || fail "benchmark_run.log is not one line"
grep -q '^{"model_name": "trivial", "dataset": {"name": "imagenet"}, "machine_config": {' "$log/benchmark_run.log" \
  || fail "benchmark_run.log does not start as tf's: $(cut -c1-200 "$log/benchmark_run.log")"
grep -q '"run_parameters": \[{"name": "batch_size", "long_value": 4}, ' "$log/benchmark_run.log" \
  || fail "benchmark_run.log has no run_parameters sorted by name"
[ "$(grep -c '^{"name": "current_examples_per_sec", "value": [0-9.e+-]*, "unit": null, "global_step": [1-7], "timestamp": "[0-9-]*T[0-9:]*\.[0-9]\{6\}Z", "extras": \[\]}$' "$log/metric.log")" -eq 5 ] \
  || fail "metric.log: want 5 current_examples_per_sec lines in tf's format: $(cat "$log/metric.log")"
grep -q '"name": "average_examples_per_sec", .*"global_step": 7,' "$log/metric.log" \
  || fail "metric.log: no average_examples_per_sec at step 7"
[ "$(wc -l < "$log/metric.log")" -eq 6 ] || fail "metric.log: want 6 lines: $(cat "$log/metric.log")"
grep -q '"test_id": null,' "$log/benchmark_run.log" || fail "benchmark_run.log: test_id is not null without --benchmark_test_id"
"$CNNBENCH" "${common[@]}" --num_batches=1 --benchmark_log_dir="$log" --benchmark_test_id='nightly "7"' \
  >"$tmp/again.out" 2>"$tmp/again.err" || fail "a second run into the same directory: exit $?"
grep -qF '"test_id": "nightly \"7\"",' "$log/benchmark_run.log" \
  || fail "benchmark_run.log: no test_id from --benchmark_test_id: $(grep -o '"test_id[^,]*' "$log/benchmark_run.log")"
[ "$(wc -l < "$log/metric.log")" -eq 8 ] || fail "metric.log is not appended to (tf's \"a\"): $(cat "$log/metric.log")"
[ "$(wc -l < "$log/benchmark_run.log")" -eq 1 ] || fail "benchmark_run.log is not replaced (tf's \"w\")"
echo "ok: tf_cnn_benchmarks' benchmark_run.log and metric.log, metric.log appended"

# 2. --eval: an eval record with the accuracy the report prints.
"$CNNBENCH" "${common[@]}" --eval --eval_random_weights --num_batches=3 --display_every=1 --benchmark_log_dir="$tmp/eval" \
  >"$tmp/eval.out" 2>"$tmp/eval.err" || fail "--eval with --benchmark_log_dir: exit $?"
"$JSON_LINES_CHECK" "$tmp/eval/benchmark_run.rank0.jsonl" 0 "$tmp/eval.out" || fail "--eval: the log does not match"
read -r top1 top5 n < <(sed -nE 's/^Accuracy @ 1 = ([0-9.]+) Accuracy @ 5 = ([0-9.]+) \[([0-9]+) examples\]$/\1 \2 \3/p' "$tmp/eval.out")
grep -q "\"record\":\"eval\",.*\"step\":3,.*\"examples\":$n}" "$tmp/eval/benchmark_run.rank0.jsonl" \
  || fail "--eval: no eval record of step 3 and $n examples"
v=$(sed -n 's/^{"name": "eval_top_1_accuracy", "value": \([^,]*\), .*"global_step": 0, .*/\1/p' "$tmp/eval/metric.log")
[ -n "$v" ] && [ "$(printf '%.4f' "$v")" = "$top1" ] \
  || fail "--eval: metric.log has no eval_top_1_accuracy of $top1 at global step 0: $(cat "$tmp/eval/metric.log")"
grep -q '"name": "eval_average_examples_per_sec", ' "$tmp/eval/metric.log" \
  || fail "--eval: metric.log has no eval_average_examples_per_sec"
echo "ok: --eval's accuracy in an eval record and in metric.log"

# 3. A run that fails after setup: the summary says why.
rc=0
"$CNNBENCH" "${common[@]}" --num_batches=6 --display_every=1 --init_learning_rate=1e30 \
  --benchmark_log_dir="$tmp/diverged" >"$tmp/diverged.out" 2>"$tmp/diverged.err" || rc=$?
[ "$rc" -ne 0 ] || fail "a diverging run exited 0"
"$JSON_LINES_CHECK" "$tmp/diverged/benchmark_run.rank0.jsonl" 0 -failed || fail "the diverged run's log does not match"
tail -1 "$tmp/diverged/benchmark_run.rank0.jsonl" | grep -q '"record":"summary".*"status":"[^"]*training diverged' \
  || fail "the summary's status is not the divergence error"
echo "ok: a failed run's summary carries its error"

# 4. An unwritable directory: refused before any step, naming it.
touch "$tmp/regular"
rc=0
"$CNNBENCH" "${common[@]}" --num_batches=2 --benchmark_log_dir="$tmp/regular/logs" \
  >"$tmp/unwritable.out" 2>"$tmp/unwritable.err" || rc=$?
[ "$rc" -ne 0 ] || fail "an unwritable --benchmark_log_dir exited 0"
grep -q -- "--benchmark_log_dir=$tmp/regular/logs: $tmp/regular is not a directory" "$tmp/unwritable.err" \
  || fail "the error does not name the flag and the path"
grep -q 'Step' "$tmp/unwritable.out" && fail "steps ran before the unwritable directory was refused"
echo "ok: an unwritable directory is refused before any step"

# 5. Two ranks: one file each, named and tagged by rank.
source "$CNNB_SOURCE_DIR/tests/support/mpi.sh"
if command -v mpirun >/dev/null 2>&1 && [ -e "$CNNB_PLUGIN_DIR/libcnnb_strategy_horovod.so" ]; then
  trap 'mpi_cleanup; rm -rf "$tmp"' EXIT
  mpi_run_bounded 300 2 "$CNNBENCH" "${common[@]}" --variable_update=horovod --num_batches=4 \
    --display_every=2 --benchmark_log_dir="$tmp/mpi" >"$tmp/mpi.out" 2>"$tmp/mpi.err" \
    || fail "mpirun -np 2 with --benchmark_log_dir: exit $?"
  [ "$(ls "$tmp/mpi" | tr '\n' ' ')" = "benchmark_run.log benchmark_run.rank0.jsonl benchmark_run.rank1.jsonl metric.log " ] \
    || fail "2 ranks: want one file per rank (and rank 0's tf files), found: $(ls "$tmp/mpi")"
  [ "$(grep -c current_examples_per_sec "$tmp/mpi/metric.log")" -eq 3 ] \
    || fail "2 ranks: metric.log is not rank 0's alone (steps 1, 2, 4): $(cat "$tmp/mpi/metric.log")"
  # Only rank 0 prints the report; the world's total is in both summaries.
  "$JSON_LINES_CHECK" "$tmp/mpi/benchmark_run.rank0.jsonl" 0 "$tmp/mpi.out" || fail "rank 0's log"
  "$JSON_LINES_CHECK" "$tmp/mpi/benchmark_run.rank1.jsonl" 1 "$tmp/mpi.out" || fail "rank 1's log"
  grep -q '"ranks":2,' "$tmp/mpi/benchmark_run.rank1.jsonl" || fail "2 ranks: the run record does not say so"
  echo "ok: mpirun -np 2: a log per rank"
else
  echo "note: mpirun or the horovod plugin missing: the per-rank files are not checked"
fi

# 6. mpirun -np 2 with independent: no world, so each process is its own rank 0; the
# files are named by the launcher's rank, so that neither overwrites the other's (what
# cnnbench-tune's multi-process ceiling runs), and said once per process.
if command -v mpirun >/dev/null 2>&1; then
  trap 'mpi_cleanup; rm -rf "$tmp"' EXIT
  mpi_run_bounded 300 2 "$CNNBENCH" "${common[@]}" --variable_update=independent --num_batches=4 \
    --display_every=2 --benchmark_log_dir="$tmp/alone" --trace_file="$tmp/alone/t.json" --trace_steps=1 \
    >"$tmp/alone.out" 2>"$tmp/alone.err" || fail "mpirun -np 2 independent: exit $?"
  [ "$(ls "$tmp/alone" | tr '\n' ' ')" = "benchmark_run.log benchmark_run.rank0.jsonl benchmark_run.rank1.jsonl metric.log t.rank0.json t.rank1.json " ] \
    || fail "independent under mpirun: want a log and a trace per process, found: $(ls "$tmp/alone")"
  for r in 0 1; do
    f=$tmp/alone/benchmark_run.rank$r.jsonl
    [ "$(grep -c '^{"record":"run"' "$f")" = 1 ] && [ "$(grep -c '^{"record":"summary".*"status":"ok"' "$f")" = 1 ] \
      || fail "process $r's log is not one whole run: $(cat "$f")"
    ! grep -q '}{' "$f" || fail "process $r's log has torn lines"
  done
  [ "$(grep -c current_examples_per_sec "$tmp/alone/metric.log")" -eq 3 ] \
    || fail "independent under mpirun: metric.log is not one process's: $(cat "$tmp/alone/metric.log")"
  [ "$(grep -c "the launcher started 2 processes and --variable_update=independent joins none" "$tmp/alone.err")" = 2 ] \
    || fail "no warning from each process: $(cat "$tmp/alone.err")"
  echo "ok: mpirun -np 2 independent: each process's files apart"
fi
echo "PASS"
