#!/usr/bin/env bash
# tf_cnn_benchmarks' 138 flags (core/src/config/tf_flags.tsv): the list is whole (and, given
# a tf_cnn_benchmarks checkout in TF_CNN_BENCHMARKS_DIR, exactly its flags), docs/flags.md's
# table is the TSV's, every honoured row is a flag of the core or a plugin and every
# other row only the compatibility group's; given, a no-effect flag costs one warning
# line, a refused one exits 2 with what to do instead (tf's distributed mode: the mpirun
# line); every unknown flag is named in one message; tf's device names and defaults
# (parameter_server, distortions off) hold.
set -uo pipefail
: "${CNNBENCH:?}" "${CNNB_SOURCE_DIR:?}"
tsv="$CNNB_SOURCE_DIR/core/src/config/tf_flags.tsv"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
tiny=(--model=trivial --batch_size=2 --image_size=8 --num_classes=4 --num_batches=1
      --num_warmup_batches=0 --num_intra_threads=1)

# --- the list ----------------------------------------------------------------------
awk -F'\t' '!/^#/ && NF {print $1}' "$tsv" | sort >"$tmp/names"
[ "$(wc -l <"$tmp/names")" -eq 138 ] || fail "tf_flags.tsv has $(wc -l <"$tmp/names") rows, want tf's 138"
[ -z "$(uniq -d "$tmp/names")" ] || fail "names listed twice: $(uniq -d "$tmp/names" | tr '\n' ' ')"
for name in model xla job_name eval_batch_size variable_update ml_perf_compliance_logging \
            datasets_num_private_threads kmp_affinity trt_max_workspace_size_bytes; do
  grep -qx "$name" "$tmp/names" || fail "tf's --$name is not in tf_flags.tsv"
done
bad=$(awk -F'\t' '!/^#/ && NF && (NF != 5 || $4 !~ /^(honoured|no-effect|refused)$/) {print FNR}' "$tsv")
[ -z "$bad" ] || fail "tf_flags.tsv lines with a bad field count or status: $bad"
tf="${TF_CNN_BENCHMARKS_DIR:-}"
if [ -n "$tf" ] && [ -f "$tf/benchmark_cnn.py" ] && [ -f "$tf/tf_cnn_benchmarks.py" ]; then
  cat "$tf/benchmark_cnn.py" "$tf/tf_cnn_benchmarks.py" | tr '\n' ' ' \
    | grep -oP "DEFINE_[a-z]+\(\s*'\K[A-Za-z0-9_]+" | sort >"$tmp/tf_names"
  diff "$tmp/tf_names" "$tmp/names" >"$tmp/diff" || fail "tf_flags.tsv differs from $tf's flags: $(cat "$tmp/diff")"
  echo "ok: the names are exactly $tf's $(wc -l <"$tmp/tf_names") flags"
else
  echo "note: TF_CNN_BENCHMARKS_DIR names no tf_cnn_benchmarks checkout (scripts/tf_cnn_benchmarks): the names are checked by count and a few, not against tf's source"
fi
"$CNNB_SOURCE_DIR/scripts/tf-flags-readme.sh" --check || fail "docs/flags.md's table is not tf_flags.tsv's"

# --- honoured rows are real flags, the others only the compatibility group's --------
"$CNNBENCH" --help >"$tmp/help" 2>&1 || fail "--help exited $?"
# "group<TAB>name" for each flag (and alias) of --help.
awk '/^[A-Za-z].*:$/ {group = $0; next}
     /^  --/ {line = $0; sub(/  \(.*/, "", line); gsub(/--(\[no\])?/, "", line); gsub(/ /, "", line)
              n = split(line, names, ","); for (i = 1; i <= n; i++) print group "\t" names[i]}' \
  "$tmp/help" >"$tmp/groups"
compat="tf_cnn_benchmarks flags without their effect here:"
while read -r name status; do
  in_compat=$(awk -F'\t' -v g="$compat" -v n="$name" '$1 == g && $2 == n' "$tmp/groups" | wc -l)
  elsewhere=$(awk -F'\t' -v g="$compat" -v n="$name" '$1 != g && $2 == n' "$tmp/groups" | wc -l)
  if [ "$status" = honoured ]; then
    if [ "$elsewhere" -ne 1 ]; then
      if [ "$in_compat" -eq 1 ] && grep -A3 -- "--\(\[no\]\)\?$name " "$tmp/help" | grep -q "not installed"; then
        echo "note: --$name is honoured by a plugin not installed here"
      else
        fail "honoured --$name is not a flag of the core or a plugin ($elsewhere, $in_compat)"
      fi
    fi
  else
    [ "$elsewhere" -eq 0 ] || fail "$status --$name is a flag of the core or a plugin: mark it honoured"
    [ "$in_compat" -eq 1 ] || fail "$status --$name is not declared in '$compat'"
  fi
done < <(awk -F'\t' '!/^#/ && NF {print $1, $4}' "$tsv")

# --- what a run says --------------------------------------------------------------
# Every unknown flag in one message; known tf flags are not among them; "did you mean"
# points at tf's own names.
"$CNNBENCH" "${tiny[@]}" --xla --foo --barr=1 --eval_batch_siz=4 --graph_fil=x >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] || fail "unknown flags: exit $rc, want 2"
[ "$(grep -c 'error' "$tmp/err")" -eq 1 ] || fail "unknown flags: not one message: $(cat "$tmp/err")"
for want in "--foo" "--barr" "--eval_batch_siz (did you mean --eval_batch_size?)" \
            "--graph_fil (did you mean --graph_file?)"; do
  grep -qF -- "$want" "$tmp/err" || fail "unknown flags: no '$want' in: $(cat "$tmp/err")"
done
! grep -q -- "--xla" "$tmp/err" || fail "--xla named as unknown: $(cat "$tmp/err")"

# No-effect flags: the run goes on, one warning line each, saying why.
"$CNNBENCH" "${tiny[@]}" --xla --staged_vars --use_tf_layers=false \
  --num_inter_threads=2 >"$tmp/out" 2>"$tmp/err" || fail "no-effect flags: exit $?: $(cat "$tmp/err")"
for name in xla staged_vars use_tf_layers num_inter_threads; do
  n=$(grep -c -- "warning: --$name has no effect here: ." "$tmp/err")
  [ "$n" -eq 1 ] || fail "--$name: $n warning lines, want 1: $(cat "$tmp/err")"
done
grep -q "^total images/sec" "$tmp/out" || fail "no-effect flags: the run did not finish"
"$CNNBENCH" "${tiny[@]}" >"$tmp/out" 2>"$tmp/err" || fail "plain run: exit $?"
! grep -q "has no effect" "$tmp/err" || fail "a warning without the flags: $(cat "$tmp/err")"
grep -q "^Variables:   parameter_server$" "$tmp/out" || fail "the default strategy is not tf's parameter_server"

# tf's distributed mode: the mpirun line that runs the same job.
"$CNNBENCH" --job_name=worker --task_index=1 --ps_hosts=h1:2222,h2:2222 \
  --worker_hosts=h1:2223,h2:2223,h3:2223 --model=resnet50 --batch_size=64 \
  --variable_update=parameter_server --server_protocol grpc >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] || fail "distributed mode: exit $rc, want 2"
want="  mpirun -np 3 -H h1,h2,h3 $CNNBENCH --model=resnet50 --batch_size=64 --variable_update=parameter_server --num_ps_ranks=2"
grep -qxF -- "$want" "$tmp/err" || fail "distributed mode: no line '$want' in: $(cat "$tmp/err")"
"$CNNBENCH" --job_name=worker --worker_hosts=a:1,b:1 --variable_update=distributed_replicated \
  >"$tmp/out" 2>"$tmp/err"
grep -qxF -- "  mpirun -np 2 -H a,b $CNNBENCH --variable_update=replicated" "$tmp/err" \
  || fail "distributed_replicated: $(cat "$tmp/err")"
# --task_index alone is tf's local run: a warning.
"$CNNBENCH" "${tiny[@]}" --task_index=0 >"$tmp/out" 2>"$tmp/err" \
  && grep -q -- "--task_index has no effect here" "$tmp/err" || fail "--task_index alone: $(cat "$tmp/err")"

# A flag with no effect in this configuration: one warning line.
for strategy in independent parameter_server; do
  "$CNNBENCH" "${tiny[@]}" --variable_update=$strategy --gradient_repacking=2 >"$tmp/out" 2>"$tmp/err" \
    || fail "--gradient_repacking with $strategy: exit $?"
  [ "$(grep -c -- "--gradient_repacking=2 has no effect here" "$tmp/err")" -eq 1 ] \
    || fail "--gradient_repacking with $strategy: $(cat "$tmp/err")"
done

# tf's names for the same stop and the trace format.
"$CNNBENCH" "${tiny[@]}" --stop_at_top_1_accuracy=1.5 >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "must be a top-1 fraction" "$tmp/err" \
  || fail "--stop_at_top_1_accuracy is not --target_accuracy: exit $rc: $(cat "$tmp/err")"
"$CNNBENCH" "${tiny[@]}" --trace_file="$tmp/t.json" --nouse_chrome_trace_format >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -q "StepStats" "$tmp/err" && [ ! -e "$tmp/t.json" ] \
  || fail "--nouse_chrome_trace_format with --trace_file: exit $rc: $(cat "$tmp/err")"
"$CNNBENCH" "${tiny[@]}" --trace_file="$tmp/t.json" --use_chrome_trace_format >"$tmp/out" 2>"$tmp/err" \
  && [ -s "$tmp/t.json" ] || fail "--use_chrome_trace_format --trace_file: no trace: $(cat "$tmp/err")"

# --display_perf_ewma: in [0, 1] as tf's bounds; the step lines then show the EWMA
# (unit_report checks its numbers against tf's formula).
"$CNNBENCH" "${tiny[@]}" --display_perf_ewma=1.5 >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -qF -- "--display_perf_ewma=1.5: must be in [0, 1]" "$tmp/err" \
  || fail "--display_perf_ewma=1.5: exit $rc: $(cat "$tmp/err")"
"$CNNBENCH" "${tiny[@]}" --num_batches=3 --display_every=1 --display_perf_ewma=0.5 >"$tmp/out" 2>"$tmp/err" \
  && [ "$(grep -c $'^[0-9]*\timages/sec: ' "$tmp/out")" -eq 3 ] \
  || fail "--display_perf_ewma=0.5: exit $?: $(cat "$tmp/out" "$tmp/err")"

# --mkl: tf's Intel OpenMP settings reach GNU OpenMP, the cpu device's runtime: the run
# restarts once with them set, and libgomp's own print of what it read (--kmp_settings=1,
# OMP_DISPLAY_ENV) shows them. Without --mkl a --kmp_* flag costs one warning.
omp_clean=(timeout 60 env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u OMP_PROC_BIND -u OMP_PLACES
           -u GOMP_CPU_AFFINITY -u OMP_DISPLAY_ENV -u OMP_DISPLAY_AFFINITY)
"${omp_clean[@]}" "$CNNBENCH" "${tiny[@]}" --mkl >"$tmp/out" 2>"$tmp/err" || fail "--mkl: exit $?: $(cat "$tmp/err")"
[ "$(grep -c "restarting once" "$tmp/err")" -eq 1 ] || fail "--mkl: not one restart line: $(cat "$tmp/err")"
for want in "OMP_WAIT_POLICY = 'PASSIVE'" "OMP_PROC_BIND = 'CLOSE'" "GOMP_SPINCOUNT = '0'" \
            "OMP_NUM_THREADS = '1'" "OMP_DISPLAY_AFFINITY = 'TRUE'"; do
  grep -qF "$want" "$tmp/err" || fail "--mkl: libgomp did not read $want: $(cat "$tmp/err")"
done
grep -q "^total images/sec" "$tmp/out" || fail "--mkl: the run did not finish"
"${omp_clean[@]}" "$CNNBENCH" "${tiny[@]}" --mkl --kmp_blocktime=2 --kmp_affinity=scatter \
  >"$tmp/out" 2>"$tmp/err" || fail "--mkl --kmp_blocktime=2: exit $?: $(cat "$tmp/err")"
# A measured spin count differs at each measurement: still one restart, not one per look.
[ "$(grep -c "restarting once" "$tmp/err")" -eq 1 ] || fail "--kmp_blocktime=2: not one restart line"
grep -q "GOMP_SPINCOUNT = '[1-9][0-9]*'" "$tmp/err" && grep -qF "OMP_PROC_BIND = 'SPREAD'" "$tmp/err" \
  || fail "--kmp_blocktime=2 --kmp_affinity=scatter: $(grep -E 'SPINCOUNT|PROC_BIND' "$tmp/err")"
"$CNNBENCH" "${tiny[@]}" --mkl --kmp_affinity=compact,1,4 >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -qF -- "--kmp_affinity=compact,1,4: an offset (4)" "$tmp/err" \
  || fail "--kmp_affinity with an offset: exit $rc: $(cat "$tmp/err")"
"$CNNBENCH" "${tiny[@]}" --kmp_blocktime=5 >"$tmp/out" 2>"$tmp/err" \
  && [ "$(grep -c -- "--kmp_blocktime has no effect without --mkl" "$tmp/err")" -eq 1 ] \
  && ! grep -q "OPENMP DISPLAY ENVIRONMENT" "$tmp/err" \
  || fail "--kmp_blocktime without --mkl: $(cat "$tmp/err")"

# --graph_file: the model report --model_info prints, written before the run.
"$CNNBENCH" "${tiny[@]}" --graph_file="$tmp/graph.txt" >"$tmp/out" 2>"$tmp/err" \
  || fail "--graph_file: exit $?: $(cat "$tmp/err")"
"$CNNBENCH" "${tiny[@]}" --model_info >"$tmp/info" 2>/dev/null || fail "--model_info: exit $?"
cmp -s "$tmp/graph.txt" "$tmp/info" || fail "--graph_file is not --model_info's report: $(head -3 "$tmp/graph.txt")"
grep -q "^Layer " "$tmp/graph.txt" || fail "--graph_file holds no layer table"
"$CNNBENCH" "${tiny[@]}" --graph_file="$tmp/no/such/dir/g.txt" >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] && grep -qF -- "--graph_file=$tmp/no/such/dir/g.txt: No such file" "$tmp/err" \
  || fail "--graph_file into a missing folder: exit $rc: $(cat "$tmp/err")"

# --eval_during_training_at_specified_steps / _epochs: after those steps, and at the end.
# shellcheck source=../support/eval_lines.sh
. "$CNNB_SOURCE_DIR/tests/support/eval_lines.sh" # tf's lines: "Step G: Accuracy ..." per evaluation
evals() { grep -c "Accuracy @ 1 = " "$tmp/out"; }
at() { eval_lines "$tmp/out" | grep -q "^Step $1: Accuracy"; } # global step = step: no warm-up
"$CNNBENCH" --model=trivial --data_name=cifar10 --batch_size=4 --num_batches=6 --num_warmup_batches=0 \
  --num_intra_threads=1 --num_eval_batches=1 --eval_during_training_at_specified_steps=2,5 \
  >"$tmp/out" 2>"$tmp/err" || fail "at_specified_steps: exit $?: $(cat "$tmp/err")"
[ "$(evals)" -eq 3 ] && at 2 && at 5 \
  || fail "at_specified_steps=2,5 over 6 steps: not steps 2, 5 and the end: $(grep Accuracy "$tmp/out")"
if [ -n "${MAKE_CIFAR:-}" ]; then
  # 320 examples an epoch in batches of 8: epochs 0.1 and 0.2 end at steps 39 // 8 = 4 and 71 // 8 = 8.
  # No --data_name: tf's guess finds 'cifar10' in the path.
  mkdir "$tmp/cifar10" && "$MAKE_CIFAR" "$tmp/cifar10" 64 7 >/dev/null
  "$CNNBENCH" --model=trivial --data_dir="$tmp/cifar10" --batch_size=8 --num_batches=10 \
    --num_warmup_batches=0 --num_intra_threads=1 --num_eval_batches=1 \
    --eval_during_training_at_specified_epochs=0.2,0.1 >"$tmp/out" 2>"$tmp/err" \
    || fail "at_specified_epochs: exit $?: $(cat "$tmp/err")"
  grep -q "^Dataset:     cifar10 (cifar10)" "$tmp/out" || fail "--data_name not guessed from --data_dir=$tmp/cifar10"
  [ "$(evals)" -eq 3 ] && at 4 && at 8 \
    || fail "at_specified_epochs=0.2,0.1: not steps 4, 8 and the end: $(grep Accuracy "$tmp/out") $(cat "$tmp/err")"
fi
"$CNNBENCH" "${tiny[@]}" --eval_during_training_at_specified_steps=2,x >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && grep -qF -- "--eval_during_training_at_specified_steps: 'x' is not a step" "$tmp/err" \
  || fail "a bad step: exit $rc: $(cat "$tmp/err")"

# tf's device names: CPU is cpu; gpu without a usable GPU stops saying so.
"$CNNBENCH" "${tiny[@]}" --device=CPU >"$tmp/out" 2>"$tmp/err" || fail "--device=CPU: exit $?"
grep -q "^Devices:     \['/cpu:0'\]" "$tmp/out" || fail "--device=CPU did not run on the cpu device"
"$CNNBENCH" "${tiny[@]}" --device=gpu >"$tmp/out" 2>"$tmp/err"; rc=$?
if [ $rc -eq 0 ]; then
  echo "note: --device=gpu ran: a GPU is usable here"
else
  [ $rc -eq 2 ] || fail "--device=gpu: exit $rc, want 2"
  grep -qE "no GPU can run here|cannot run on this machine" "$tmp/err" \
    || fail "--device=gpu's refusal does not say there is no GPU: $(cat "$tmp/err")"
fi

# tf's --distortions: off by default; the cifar10 datasource shares the flag.
awk '/^  --/ {on = /^  --\[no\]distortions /} on' "$tmp/help" >"$tmp/distortions"
grep -q "default false" "$tmp/distortions" || fail "--distortions is not false by default: $(cat "$tmp/distortions")"
grep -q "Plugin cifar10:\|CIFAR-10 training images" "$tmp/distortions" \
  || fail "--distortions' help does not say what cifar10 does with it"

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "PASS: tf_cnn_benchmarks' flags"
