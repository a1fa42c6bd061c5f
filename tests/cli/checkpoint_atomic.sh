#!/usr/bin/env bash
# Checkpoint saves survive kill -9 (core/src/base/atomic_file.c, checkpoint_dir.c): a writer
# saving 64 MiB checkpoints in a loop (tests/tools/checkpoint_writer.c) is killed with
# SIGKILL after varied delays, so the kills land inside a checkpoint's write, between it
# and the index, inside the index's write, or while deleting old ones; after each kill
#  - the directory resumes from its newest checkpoint (no fallback needed: the newest was
#    never torn), the index's latest or one saved just after it, every value of it
#    intact, and every checkpoint the index names intact too (checkpoint_writer verify);
#  - the next run resumes after that step, and removes the temporary file the killed run
#    left, so at most one is ever lying around.
# Some kill must land mid-write (a temporary file present), or the test proved nothing.
set -uo pipefail
: "${CHECKPOINT_WRITER:?}"
work=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$work"' EXIT
dir=$work/train
fail() { echo "FAIL: $*"; exit 1; }

delays=(0.05 0.3 0.45 0.7 0.2 0.9 0.15 0.55 0.35 0.8)
mid_write=0
saves=0
last_step=0
for delay in "${delays[@]}"; do
  "$CHECKPOINT_WRITER" write "$dir" 64 2 > "$work/log" 2> "$work/err" &
  pid=$!
  sleep "$delay"
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  pid=
  # What a resume may say: a dead save's temporary file removed, the index rebuilt when
  # the kill fell between a checkpoint's rename and its index's (or the first checkpoint
  # kept out of it, when the kill came before the first index).
  grep -v -e '^checkpoint_writer: removed .*, left by a save that did not finish$' \
    -e '^checkpoint_writer: .*: [0-9]* checkpoint file(s) there are not in its index .*never deleted$' \
    -e '^checkpoint_writer: rebuilt the checkpoint index .* missed 1 newer one(s) (a save whose index update failed)$' \
    "$work/err" \
    && fail "the writer printed errors (above)"
  saves=$((saves + $(grep -c '^saved ' "$work/log")))
  tmps=$(find "$dir" -name '*.tmp.*' | wc -l)
  [ "$tmps" -le 1 ] || fail "$tmps temporary files after a kill: dead saves' are not removed"
  [ "$tmps" -eq 1 ] && mid_write=$((mid_write + 1))
  out=$("$CHECKPOINT_WRITER" verify "$dir" 2>&1) || fail "after a kill at ${delay}s: $out"
  echo "kill at ${delay}s: $out"
  if [ "$out" != none ]; then
    step=$(sed -E 's/^ok step ([0-9]+) .*/\1/' <<<"$out")
    [ "$step" -ge "$last_step" ] || fail "resumed at step $step after reaching $last_step"
    last_step=$step
  fi
done
[ "$saves" -gt 0 ] || fail "no save finished in any run: nothing was checked"
[ "$mid_write" -gt 0 ] || fail "no kill landed inside a save (no temporary file was ever left)"
# Each run resumed where the last left off: the steps were not restarted from 1.
[ "$last_step" -ge "$saves" ] || fail "$saves saves but the last step is $last_step"
echo "checkpoint_atomic: $saves saves, ${#delays[@]} kills ($mid_write inside a write), always resumable"
