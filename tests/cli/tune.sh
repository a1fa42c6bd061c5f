#!/usr/bin/env bash
# tune.sh — cnnbench-tune as a user meets it, on the fixture_tune device (tests/fixtures/
# fixture_tune_model.h: a step time known from the configuration; the search's choice of
# the optimum is unit_tune_search's, exact on a virtual clock; here the runs are real and
# the machine may be busy, so only what noise cannot change is asserted):
# - bad input exits 2 before any run, naming what and where: an unknown model, an unknown
#   flag in the space file (FILE:LINE), an --out that cannot be written or holds other
#   files, multi-process layouts without mpirun, a budget too small for one run;
# - Ctrl-C (SIGINT) stops the running child, keeps results.jsonl and a report marked
#   interrupted, exit 130; the same command then continues and finishes;
# - the report's tables, the failures (fp16 refused, batch 128 out of memory) recorded and
#   never picked, a chart, and a flagfile that cnnbench --flagfile runs;
# - a third call measures no probe again.
set -u
: "${CNNBENCH:?run through ctest (CNNBENCH unset)}"
: "${CNNBENCH_TUNE:?run through ctest (CNNBENCH_TUNE unset)}"
: "${CNNB_BUILD_DIR:?run through ctest (CNNB_BUILD_DIR unset)}"
fx="$CNNB_BUILD_DIR/fixtures/tune"
[[ -f "$fx/libfixture_tune_device.so" ]] || { echo "FAIL: fixture not built in $fx"; exit 1; }
export CNNB_PLUGIN_PATH="$fx" OMP_WAIT_POLICY=passive
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

run() { # run NAME ARGS...: cnnbench-tune, keeping stdout, stderr and the exit code
  local name=$1
  shift
  "$CNNBENCH_TUNE" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
  echo $? >"$tmp/$name.rc"
}
expect() { # expect NAME RC TEXT: exit code and a text in stderr
  local rc
  rc=$(cat "$tmp/$1.rc")
  [[ "$rc" == "$2" ]] || fail "$1: exit $rc, expected $2: $(tail -3 "$tmp/$1.err")"
  grep -qF -- "$3" "$tmp/$1.err" || fail "$1: expected in stderr: $3
$(cat "$tmp/$1.err")"
}

cat >"$tmp/space" <<'SPACE'
# the fixture: one strategy and bucket, the precisions probed, batches doubled from 32
variable_update = replicated
gradient_bucket_mb@replicated = 2
precision = bf16, fp16
data_name := cifar10
image_size := 8
num_intra_threads = 1
SPACE
base=(--models=trivial --device=fixture_tune --min_batch_size=32 --space="$tmp/space")

# ---- bad input ---------------------------------------------------------------------
run model --models=trivial,resnet5O --out="$tmp/o_model"
expect model 2 "no model 'resnet5O' is installed (did you mean resnet50?)"
printf 'precision = bf16\n\ngradient_bucket = 2\n' >"$tmp/bad_space"
run space --models=trivial --space="$tmp/bad_space" --out="$tmp/o_space"
expect space 2 "$tmp/bad_space:3: unknown flag --gradient_bucket (did you mean --gradient_bucket_mb?)"
touch "$tmp/a_file"
run out "${base[@]}" --out="$tmp/a_file/out"
expect out 2 "--out=$tmp/a_file/out: cannot make the directory"
mkdir "$tmp/theirs" && echo keep >"$tmp/theirs/notes.txt"
run foreign "${base[@]}" --out="$tmp/theirs"
expect foreign 2 "holds files cnnbench-tune did not write"
[[ "$(cat "$tmp/theirs/notes.txt")" == keep && ! -e "$tmp/theirs/results.jsonl" ]] ||
  fail "foreign: the directory was written to"
PATH=/nonexistent run nompi "${base[@]}" --num_devices=2 --processes=2 --out="$tmp/o_nompi"
expect nompi 2 "needs mpirun, which is not on PATH"
run nomodels --device=cpu
expect nomodels 2 "--models is required"
run budget_text --models=trivial --budget=soon
expect budget_text 2 "--budget=soon: expected a time such as 90s, 10m or 1h"
# One step of AlexNet at 224x224 (and its 61M weights made) takes more than half a second.
run tiny --models=alexnet --budget=0.5s --out="$tmp/o_tiny"
expect tiny 2 "--budget=0.5s is too small for one run of alexnet"
for o in o_model o_space o_nompi; do [[ ! -e "$tmp/$o" ]] || fail "$o: made before the input was checked"; done

# ---- Ctrl-C, then the same command continues -----------------------------------------
out="$tmp/tuned"
"$CNNBENCH_TUNE" "${base[@]}" --budget=60s --out="$out" >"$tmp/int.out" 2>"$tmp/int.err" &
pid=$!
for _ in $(seq 1 600); do
  [[ -f "$out/results.jsonl" ]] && (($(wc -l <"$out/results.jsonl") >= 2)) && break
  sleep 0.05
done
kill -INT "$pid"
wait "$pid"
echo $? >"$tmp/int.rc"
expect int 130 "interrupted: the results so far are kept in $out/results.jsonl"
kept=$(wc -l <"$out/results.jsonl")
cp "$out/results.jsonl" "$tmp/kept.jsonl"
((kept >= 2)) || fail "int: $kept results kept"
grep -q "Interrupted" "$out/report.md" || fail "int: the report does not say it was interrupted"

run again "${base[@]}" --budget=60s --out="$out"
[[ "$(cat "$tmp/again.rc")" == 0 ]] || fail "again: exit $(cat "$tmp/again.rc"): $(tail -3 "$tmp/again.err")"
head -n "$kept" "$out/results.jsonl" | cmp -s - "$tmp/kept.jsonl" ||
  fail "again: the kept results changed"
# The interrupted call's runs are not measured again: every command once per length.
runs() { sed -n 's/.*"key":"\([^"]*\)".*"steps":\([0-9]*\).*/\1 \2/p' "$out/results.jsonl"; }
(($(runs | wc -l) == $(wc -l <"$out/results.jsonl"))) || fail "results.jsonl: unreadable lines"
dups=$(runs | sort | uniq -d)
[[ -z "$dups" ]] || fail "again: measured twice: $dups"
(($(wc -l <"$out/results.jsonl") > kept)) || fail "again: nothing more was measured"

# ---- what the search leaves -------------------------------------------------------
report="$out/report.md"
grep -q "^## Best configuration per model on this machine" "$report" || fail "no table across models"
grep -q "^| trivial | replicated | 1x1 |" "$report" || fail "no winner row: $(grep trivial "$report" | head -3)"
grep -q "^| rank | configuration | images/sec | vs independent | peak RSS | steps | command |" "$report" ||
  fail "no ranked table"
grep -q "fp16 is not supported" "$report" || fail "the refused precision is not in the report"
grep -q "| independent 1x1 b128 bf16 t0 | out of memory |" "$report" ||
  fail "the out-of-memory batch is not in the report: $(grep -i memory "$report")"
flags="$out/trivial.flags"
[[ -f "$flags" ]] || fail "no flagfile"
grep -qx -- "--device=fixture_tune" "$flags" || fail "flagfile: no --device line"
grep -qx -- "--precision=bf16" "$flags" || fail "flagfile: the refused fp16 picked?"
grep -qE -- "^--batch_size=(32|64)$" "$flags" || fail "flagfile: a batch that ran out of memory?"
grep -qx -- "--variable_update=replicated" "$flags" || fail "flagfile: the ceiling was picked?"
head -c 200 "$out/trivial.svg" | grep -q "<svg" || fail "no chart"
grep -q ">replicated<" "$out/trivial.svg" || fail "chart: no strategy group"
"$CNNBENCH" --flagfile="$flags" --num_batches=2 --num_warmup_batches=0 >"$tmp/rerun.out" 2>"$tmp/rerun.err" ||
  fail "cnnbench --flagfile=$flags: $(tail -2 "$tmp/rerun.err")"
grep -q "^Model:       trivial" "$tmp/rerun.out" || fail "rerun: not the tuned model"

# A third call measures no probe again.
probes=$(grep -c '"kind":"probe"' "$out/results.jsonl")
run third "${base[@]}" --budget=60s --out="$out"
[[ "$(cat "$tmp/third.rc")" == 0 ]] || fail "third: exit $(cat "$tmp/third.rc")"
[[ "$(grep -c '"kind":"probe"' "$out/results.jsonl")" == "$probes" ]] || fail "third: probes measured again"

((failures == 0)) || exit 1
echo "ok: cnnbench-tune: bad input refused, Ctrl-C kept and continued, report, chart, flagfile"
