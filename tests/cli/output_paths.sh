#!/usr/bin/env bash
# output_paths.sh — the files a flag names for cnnbench to write (--trace_file,
# --graph_file, the --benchmark_log_dir logs) must be regular files or new ones
# (base/output_file.h), found before the first step (issue 37, cases 4 and 5):
# - a FIFO as --trace_file is refused at once, naming it, where the open used to block
#   for a reader that never came (with SIGTERM ignored); the same for --graph_file and
#   for a FIFO at the benchmark log's path;
# - /dev/full as --trace_file is refused before the first step, not after the run;
# - a trace that a full disk (here: RLIMIT_FSIZE, SIGXFSZ ignored) stops names errno;
# - a regular file that exists is still written over, as before.
set -u
: "${CNNBENCH:?run through ctest (CNNBENCH unset)}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
run=(--model=trivial --batch_size=2 --num_warmup_batches=1 --num_batches=2 --num_intra_threads=1)

refused() { # refused NAME TEXT ARGS...: exit 1 or 2 (not killed), TEXT in stderr, no step ran
  local name=$1 text=$2 rc
  shift 2
  # KILL after 60 s: the old open blocked for ever, and ignored the first TERM.
  timeout -s KILL 60 "$CNNBENCH" "${run[@]}" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
  rc=$?
  [[ $rc == 1 || $rc == 2 ]] || fail "$name: exit $rc (137: it blocked), expected a refusal: $(tail -2 "$tmp/$name.err")"
  grep -qF -- "$text" "$tmp/$name.err" || fail "$name: expected in stderr: $text
$(tail -3 "$tmp/$name.err")"
  ! grep -q "Running warm up\|^total images/sec" "$tmp/$name.err" "$tmp/$name.out" ||
    fail "$name: steps ran before the path was refused"
}
notreg="it is not a regular file (a FIFO, a device or a socket)"

mkfifo "$tmp/trace.fifo"
refused fifo "--trace_file=$tmp/trace.fifo: cannot create $tmp/trace.fifo: $notreg" \
  --trace_file="$tmp/trace.fifo"
# A FIFO someone reads from opens: still refused.
sleep 150 3<>"$tmp/trace.fifo" >/dev/null 2>&1 &
reader=$!
refused fifo_read "--trace_file=$tmp/trace.fifo: cannot create $tmp/trace.fifo: $notreg" \
  --trace_file="$tmp/trace.fifo"
kill "$reader" 2>/dev/null
wait "$reader" 2>/dev/null
refused graph "--graph_file=$tmp/trace.fifo: $notreg" --graph_file="$tmp/trace.fifo"
mkdir "$tmp/logs"
mkfifo "$tmp/logs/benchmark_run.rank0.jsonl"
refused log "--benchmark_log_dir=$tmp/logs: cannot write $tmp/logs/benchmark_run.rank0.jsonl: $notreg" \
  --benchmark_log_dir="$tmp/logs"
echo "ok: FIFOs refused at once: --trace_file, --graph_file, --benchmark_log_dir's log"

refused full "--trace_file=/dev/full: cannot create /dev/full: $notreg" --trace_file=/dev/full
echo "ok: /dev/full refused before the first step"

# A full disk at the end names why (the trace is written whole after the steps).
(
  trap '' XFSZ
  ulimit -f 1 # 1 KiB: the trace is several
  "$CNNBENCH" "${run[@]}" --trace_file="$tmp/big.json" >/dev/null 2>"$tmp/big.err"
  echo $? >"$tmp/big.rc"
)
[[ "$(cat "$tmp/big.rc")" == 1 ]] || fail "big: exit $(cat "$tmp/big.rc"), expected 1"
grep -qF -- "--trace_file: writing $tmp/big.json failed: File too large" "$tmp/big.err" ||
  fail "big: errno not named: $(tail -2 "$tmp/big.err")"
echo "ok: a trace the file system refuses names errno"

echo old >"$tmp/old.json"
"$CNNBENCH" "${run[@]}" --trace_file="$tmp/old.json" >/dev/null 2>"$tmp/old.err" ||
  fail "old: a regular file was refused: $(tail -2 "$tmp/old.err")"
head -c 1 "$tmp/old.json" | grep -q "{" || fail "old: the trace did not replace the file"

((failures == 0)) || exit 1
echo "ok: output paths: regular or new files only, refused before any step, errno named"
