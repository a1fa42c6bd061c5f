#!/usr/bin/env bash
# Time to accuracy (--target_accuracy, as MLPerf): lenet on a small JPEG dataset whose class
# is the blue level (tests/cli/imagenet_learn.sh's) evaluates after every epoch and stops
# at the first evaluation that reaches the target: the report says when (step, wall time,
# images, epochs), no step runs after it, and the total follows. A target the run cannot
# reach ends with a non-zero exit naming the best top-1; the flag without an evaluation to
# measure it, or outside (0, 1], is refused up front.
set -euo pipefail
if [ -z "${MAKE_IMAGE_FOLDER:-}" ]; then
  echo "SKIP: the build has no JPEG component (libjpeg-turbo), so no imagenet datasource"; exit 77
fi
: "${CNNBENCH:?}" "${CNNB_SOURCE_DIR:?}"
source "$CNNB_SOURCE_DIR/tests/support/eval_lines.sh"
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
out=$dir/out
fail() { echo "FAIL: $*"; echo "--- stdout"; cat "$out" 2>/dev/null; echo "--- stderr"; cat "$out.err" 2>/dev/null; exit 1; }

"$MAKE_IMAGE_FOLDER" "$dir/data" train 4 40 0 random       # 160 images: 10 steps an epoch
"$MAKE_IMAGE_FOLDER" "$dir/data" validation 4 10 0 random
train() {
  "$CNNBENCH" --model=lenet --data_dir="$dir/data" --num_classes=5 --batch_size=16 \
    --num_warmup_batches=0 --display_every=1 --optimizer=momentum --init_learning_rate=0.01 \
    --distortions=false --eval_during_training_every_n_epochs=1 "$@" >"$out" 2>"$out.err"
}

train --num_epochs=30 --target_accuracy=0.9 || fail "exit $?"
line=$(grep -P '^Reached --target_accuracy=0.9: top-1 \d\.\d{4} at step \d+ \(global step \d+\) in \d+\.\d{3} s wall time, \d+ images, \d+\.\d{3} epochs$' "$out") \
  || fail "no time-to-accuracy line"
step=$(grep -oP 'at step \K\d+' <<<"$line")
top1=$(grep -oP 'top-1 \K[0-9.]+' <<<"$line")
awk -v a="$top1" 'BEGIN { exit !(a >= 0.9) }' || fail "stopped at top-1 $top1 < 0.9"
[ $((step % 10)) -eq 0 ] && [ "$step" -lt 300 ] || fail "stopped at step $step: not an epoch's end before the last step"
[ "$(eval_lines "$out" | grep -oP "^Step $step: Accuracy @ 1 = \K[0-9.]+")" = "$top1" ] || fail "the line's top-1 is not step $step's evaluation"
last=$(grep -oP '^\d+(?=\timages/sec)' "$out" | tail -1)
[ "$last" -eq "$step" ] || fail "steps ran after the target was reached (last $last, target at $step)"
grep -q "^$((step * 16)) images" <<<"$(grep -oP '\d+ images' <<<"$line")" || fail "images: $(grep -oP '\d+ images' <<<"$line"), expected $((step * 16))"
grep -q ", $(awk -v s="$step" 'BEGIN { printf "%.3f", s / 10 }') epochs$" <<<"$line" || fail "epochs: $line"
grep -qP '^total images/sec: \d+\.\d\d$' "$out" || fail "no total after stopping"
# Earlier evaluations stayed below the target (else it stopped late).
eval_lines "$out" | grep -oP '^Step \d+: Accuracy @ 1 = \K[0-9.]+' | head -n -1 \
  | awk '$1 >= 0.9 { bad = 1 } END { exit bad }' || fail "an earlier evaluation already reached 0.9"
echo "reached 0.9 at step $step (top-1 $top1)"

# Not reached: a non-zero exit naming the best top-1.
train --num_batches=2 --target_accuracy=1 && fail "unreachable target: exit 0"
grep -qP -- '--target_accuracy=1 not reached in 2 steps: the best top-1 was \d\.\d{4}, at step \d' "$out.err" \
  || fail "unreachable target: unclear message"

# Refused up front.
for args in "--target_accuracy=0.5" "--target_accuracy=1.5 --eval_during_training_every_n_steps=5" \
            "--target_accuracy=0 --eval_during_training_every_n_steps=5"; do
  set +e; "$CNNBENCH" --model=lenet --num_classes=5 --num_batches=1 $args >"$out" 2>"$out.err"; code=$?; set -e
  [ "$code" -eq 2 ] || fail "'$args': exit $code, expected 2"
  grep -q -- "--target_accuracy" "$out.err" || fail "'$args': the message does not name the flag"
done
echo PASS
