#!/usr/bin/env bash
# cnnbench itself killed with SIGKILL while it saves: ResNet-50 at 64x64 (about 200 MB a
# checkpoint with its momentum) saving after every step is killed after varied delays;
# after each kill the directory's latest checkpoint loads whole (--eval --train_dir: the
# newest one the index names, never a torn one, at a step no earlier than the last
# kill's), and the next training run resumes from it.
# (The writer underneath is checked value by value in cli_checkpoint_atomic.)
set -uo pipefail
: "${CNNBENCH:?}"
work=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; for f in "$work"/*.err; do echo "--- $f"; tail -5 "$f"; done; exit 1; }
# Started directly, not through a shell function, so $! is cnnbench itself.
train=(--model=resnet50 --image_size=64 --batch_size=1 --num_warmup_batches=0 --num_intra_threads=1
       --optimizer=momentum --save_model_steps=1 --max_ckpts_to_keep=2 --train_dir="$work/d")

mid_save=0
last=0
# Each run is killed a varied time after its first save of this round, so kills land in
# the next step, inside a save (a temporary file present) or between a save and the index.
for delay in 0.2 0.7 1.2; do
  log=$work/run-$delay.err # a new file a round: the last round's line cannot be read for this one's
  "$CNNBENCH" "${train[@]}" --num_batches=1000 >/dev/null 2>"$log" &
  pid=$!
  for _ in $(seq 600); do grep -qs "saved checkpoint" "$log" && break; sleep 0.1; done
  grep -qs "saved checkpoint" "$log" || fail "no save within 60 s"
  sleep "$delay"
  ls "$work/d" | grep -q '\.tmp\.' && mid_save=$((mid_save + 1))
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  kill -0 "$pid" 2>/dev/null && fail "cnnbench survived kill -9"
  pid=
  "$CNNBENCH" --model=resnet50 --image_size=64 --batch_size=1 --num_warmup_batches=0 --num_intra_threads=1 \
    --eval --num_batches=1 --train_dir="$work/d" >"$work/resume.out" 2>"$work/resume.err" \
    || fail "loading the latest checkpoint after a kill ${delay}s after a save: exit $?"
  step=$(grep -oP 'evaluating .*\(global step \K\d+' "$work/resume.err") || fail "--eval loaded nothing"
  grep -qi "warn.*\.safetensors" "$work/resume.err" && fail "a torn checkpoint was found (the index named it)"
  [ "$step" -gt "$last" ] || fail "the latest checkpoint is step $step, but step $((last + 1)) was saved"
  last=$step
  echo "killed ${delay}s after a save: the latest checkpoint, step $step, loads"
done
echo "PASS ($mid_save of 3 kills caught a save in progress)"
