#!/usr/bin/env bash
# --benchmark_log_dir on a file system that fills up during the run (a 256 KiB tmpfs the
# test mounts, and unmounts on exit): the log stops and the run does not. Exit 0, every
# step trained, the final checkpoint (in a --train_dir elsewhere) saved, one warning
# naming the file and the reason when the log stops and one more at the end with the
# count of records lost, and every file of the log ending in a whole JSON line. Before
# issue 23 (finding 5) the run stopped at the step that filled the disk, exit 1, nothing
# saved, the error said twice in one line, and the log's last line torn. Skips (77) where
# mounts cannot be made (not root, or no CAP_SYS_ADMIN).
set -euo pipefail
: "${CNNBENCH:?}"
tmp=$(mktemp -d)
mounted=
trap '[ -n "$mounted" ] && umount "$mounted"; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; for f in "$tmp"/*.err; do echo "--- $f"; cat "$f"; done; exit 1; }
mkdir "$tmp/logs" "$tmp/train"
if ! mount -t tmpfs -o size=256k tmpfs "$tmp/logs" 2>"$tmp/mount.txt"; then
  echo "SKIP: cannot mount a tmpfs here: $(cat "$tmp/mount.txt")"
  exit 77
fi
mounted=$tmp/logs
# whole_json_lines FILE...: every line of each file one JSON value, the last ending in \n.
if command -v python3 >/dev/null; then
  whole_json_lines() {
    python3 - "$@" <<'PY'
import json, sys
for path in sys.argv[1:]:
    data = open(path, "rb").read()
    if not data.endswith(b"\n"):
        sys.exit(f"{path} ends in a torn line: ...{data[-80:]!r}")
    for n, line in enumerate(data.split(b"\n")[:-1], 1):
        try:
            json.loads(line)
        except ValueError as e:
            sys.exit(f"{path}, line {n} is not JSON ({e}): {line[:120]!r}")
PY
  }
elif command -v jq >/dev/null; then
  whole_json_lines() {
    local f line n
    for f in "$@"; do
      [ "$(tail -c 1 "$f" | od -An -c | tr -d ' ')" = '\n' ] || { echo "$f ends in a torn line"; return 1; }
      n=0
      while IFS= read -r line; do
        n=$((n + 1))
        jq -e . <<<"$line" >/dev/null 2>&1 || { echo "$f, line $n is not JSON: ${line:0:120}"; return 1; }
      done <"$f"
    done
  }
else
  echo "SKIP: neither python3 nor jq is here to read the JSON lines"
  exit 77
fi
# 2000 displayed steps make ~1 MiB of JSON lines and metric.log: the 256 KiB (a few pages
# even with 64 KiB pages) fill up about a quarter of the way.
steps=2000
log=$tmp/logs/benchmark_run.rank0.jsonl
set +e
"$CNNBENCH" --model=trivial --data_name=cifar10 --batch_size=2 --num_warmup_batches=0 \
  --num_intra_threads=1 --num_batches=$steps --display_every=1 \
  --benchmark_log_dir="$tmp/logs" --train_dir="$tmp/train" >"$tmp/run.out" 2>"$tmp/run.err"
code=$?
set -e
[ "$code" -eq 0 ] || fail "exit $code, expected 0: a full log directory must not stop the run"
grep -q "^$steps	images/sec:" "$tmp/run.out" || fail "the run did not reach step $steps"
grep -q "^total images/sec:" "$tmp/run.out" || fail "no total line"
ls "$tmp/train"/model.ckpt-*"$steps".safetensors >/dev/null 2>&1 \
  || fail "the final checkpoint was not saved: $(ls "$tmp/train")"
grep -qF "saved checkpoint $tmp/train/model.ckpt-" "$tmp/run.err" || fail "no checkpoint line"
warning="cnnbench: warning: --benchmark_log_dir: cannot write $log (No space left on device): the log stops here, the run goes on"
n=$(grep -cF -- "$warning" "$tmp/run.err" || true)
[ "$n" -eq 1 ] || fail "the warning naming the file and the reason was printed $n times, expected once"
grep -qE -- "--benchmark_log_dir: the log stopped at $log \(No space left on device\): [1-9][0-9]* records of $log not written; each file ends with its last whole line" \
  "$tmp/run.err" || fail "no closing warning with the count of records lost"
[ "$(grep -c -- "--benchmark_log_dir" "$tmp/run.err")" -eq 2 ] \
  || fail "--benchmark_log_dir is named more than twice on stderr"
grep -q "error" "$tmp/run.err" && fail "an error was printed"
# Every file of the log: whole lines only, each one JSON value.
for f in "$log" "$tmp/logs/metric.log" "$tmp/logs/benchmark_run.log"; do
  [ -s "$f" ] || fail "$f is empty"
done
whole_json_lines "$log" "$tmp/logs/metric.log" "$tmp/logs/benchmark_run.log" >"$tmp/json.err" 2>&1 \
  || fail "$(cat "$tmp/json.err")"
# The log held what fitted: the run record and some steps, not all of them.
head -1 "$log" | grep -q '"record":"run"' || fail "the run record is not the first line"
written=$(grep -c '"record":"step"' "$log")
[ "$written" -gt 0 ] && [ "$written" -lt "$steps" ] || fail "$written step records: the disk did not fill"
echo PASS
