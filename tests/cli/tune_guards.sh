#!/usr/bin/env bash
# tune_guards.sh — cnnbench-tune refuses what would make its results wrong, and ends the
# way a shell expects (issue 37, cases 6-10), on the fixture_tune device:
# - contradictory or absurd input exits 2 before any run, naming what and where: a
#   budget that is not finite or past the stated maximum (no count may wrap), a
#   --min_batch_size above --max_batch_size (both named), a space file setting one flag
#   on two lines (both FILE:LINEs);
# - a second tuner on the --out of a running one is refused, naming the first's pid, and
#   writes nothing there; the first's runs are held at a gate (a cnnbench wrapper that
#   waits for a file), so no timing decides what is running when;
# - SIGTERM ends the tuner by that signal (143, as cnnbench), and a model the
#   interruption never reached is in report.md as not measured;
# - once the first has ended, its lock holds no one back: the same command finishes.
set -u
: "${CNNBENCH:?run through ctest (CNNBENCH unset)}"
: "${CNNBENCH_TUNE:?run through ctest (CNNBENCH_TUNE unset)}"
: "${CNNB_BUILD_DIR:?run through ctest (CNNB_BUILD_DIR unset)}"
fx="$CNNB_BUILD_DIR/fixtures/tune"
[[ -f "$fx/libfixture_tune_device.so" ]] || { echo "FAIL: fixture not built in $fx"; exit 1; }
export CNNB_PLUGIN_PATH="$fx" OMP_WAIT_POLICY=passive
tmp="$(mktemp -d)"
first=""
cleanup() { [[ -n "$first" ]] && kill -KILL "$first" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
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
variable_update = replicated
gradient_bucket_mb@replicated = 2
precision = bf16
data_name := cifar10
image_size := 8
num_intra_threads = 1
SPACE
base=(--models=trivial --device=fixture_tune --min_batch_size=32 --max_batch_size=64
      --space="$tmp/space")

# ---- case 7: budgets ------------------------------------------------------------------
for b in inf 1e9h 99999999999999999999s nan 169h; do
  run "budget_$b" "${base[@]}" --budget="$b" --out="$tmp/o_budget"
  expect "budget_$b" 2 "--budget=$b: expected a time such as 90s, 10m or 1h, more than 0 and at most 168h"
done
run budget_week "${base[@]}" --budget=168h --min_batch_size=64 --max_batch_size=32 --out="$tmp/o_budget"
expect budget_week 2 "--min_batch_size=64 is larger than --max_batch_size=32" # 168h itself is taken

# ---- case 8: contradictory batch bounds -----------------------------------------------
run bounds "${base[@]}" --min_batch_size=200 --max_batch_size=100 --out="$tmp/o_bounds"
expect bounds 2 "--min_batch_size=200 is larger than --max_batch_size=100"

# ---- case 9: one flag on two lines -----------------------------------------------------
printf 'batch_size = 16\nprecision = bf16\n# later\nbatch_size = 32\n' >"$tmp/twice"
run twice --models=trivial --device=fixture_tune --space="$tmp/twice" --out="$tmp/o_twice"
expect twice 2 "$tmp/twice:4: batch_size is set twice: here and at $tmp/twice:1"
printf 'gradient_bucket_mb@replicated = 2\n--gradient_bucket_mb@replicated := 4\n' >"$tmp/twice_knob"
run twice_knob --models=trivial --device=fixture_tune --space="$tmp/twice_knob" --out="$tmp/o_twice"
expect twice_knob 2 "$tmp/twice_knob:2: gradient_bucket_mb@replicated is set twice: here and at $tmp/twice_knob:1"
for o in o_budget o_bounds o_twice; do [[ ! -e "$tmp/$o" ]] || fail "$o: made before the input was checked"; done

# ---- cases 6 and 10: a second tuner on a busy --out; SIGTERM ----------------------------
# The wrapper lists plugins at once, and holds every run until $tmp/go exists.
cat >"$tmp/gated" <<GATE
#!/usr/bin/env bash
for a in "\$@"; do [[ "\$a" == --list_plugins ]] && exec "$CNNBENCH" "\$@"; done
touch "$tmp/started"
while [[ ! -e "$tmp/go" ]]; do sleep 0.05; done
exec "$CNNBENCH" "\$@"
GATE
chmod +x "$tmp/gated"
out="$tmp/busy"
"$CNNBENCH_TUNE" "${base[@]}" --models=trivial,lenet --cnnbench="$tmp/gated" --budget=120s \
  --out="$out" >"$tmp/first.out" 2>"$tmp/first.err" &
first=$!
for _ in $(seq 1 1200); do [[ -e "$tmp/started" ]] && break; sleep 0.05; done
[[ -e "$tmp/started" ]] || fail "the first tuner never started a run: $(cat "$tmp/first.err")"
run second "${base[@]}" --budget=20s --out="$out"
expect second 2 "--out=$out is in use by another cnnbench-tune: pid $first on host"
[[ ! -s "$out/results.jsonl" ]] || fail "second: results.jsonl written while the first held --out"
[[ ! -e "$out/report.md" ]] || fail "second: report.md written while the first held --out"

kill -TERM "$first"
wait "$first"
echo $? >"$tmp/first.rc"
first=""
expect first 143 "interrupted: the results so far are kept in $out/results.jsonl"
grep -q "Interrupted" "$out/report.md" || fail "first: the report does not say it was interrupted"
grep -q "^| lenet | .*not measured (interrupted before it) |" "$out/report.md" ||
  fail "first: lenet, never reached, is not in the report as not measured: $(grep -n lenet "$out/report.md")"
grep -q "^## lenet" "$out/report.md" || fail "first: no section for lenet"
grep -q "^lenet: not measured" "$tmp/first.out" || fail "first: stdout does not list lenet: $(cat "$tmp/first.out")"

# The first is gone: its lock file stays, and holds no one back.
[[ -f "$out/.cnnbench-tune.lock" ]] || fail "no lock file in $out"
touch "$tmp/go"
run after "${base[@]}" --budget=60s --out="$out"
expect after 0 "cnnbench-tune: trivial"
grep -q "^| trivial | replicated |" "$out/report.md" || fail "after: no winner row for trivial"

((failures == 0)) || exit 1
echo "ok: cnnbench-tune: budgets, batch bounds and repeated space lines refused; one tuner per --out; SIGTERM ends it with 143"
