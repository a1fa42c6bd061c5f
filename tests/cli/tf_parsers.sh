#!/usr/bin/env bash
# tf_cnn_benchmarks' own log parsers and train_and_eval assertions (its test_util.py:
# get_training_outputs_from_logs, get_evaluation_outputs_from_logs,
# check_training_outputs_are_reasonable, train_and_eval with get_params' parameters),
# re-implemented from their documented behaviour in tests/tools/tf_test_util.py, run on
# cnnbench's stdout for: training with and without --print_training_accuracy, the resume
# from --train_dir (--num_batches doubled: 15 step lines after 20 and 5 warm-up steps),
# --eval of that checkpoint (one 12-field accuracy line), --forward_only (step lines with
# the accuracies), and --eval_during_training_every_n_steps (7 // 2 + 1 evaluations). The
# script first shows the parsers refuse the lines tf's refuse (an evaluation line with a
# "Step N:" prefix, a step line missing its accuracies). Python 3's standard library only.
set -euo pipefail
: "${CNNBENCH:?}" "${CNNB_SOURCE_DIR:?}"
py=${CNNB_PYTHON:-python3}
command -v "$py" >/dev/null 2>&1 || { echo "SKIP: no $py to run tf_test_util.py"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! "$py" "$CNNB_SOURCE_DIR/tests/tools/tf_test_util.py" "$CNNBENCH" "$tmp"; then
  for f in "$tmp"/*.out "$tmp"/*.err; do [ -e "$f" ] && { echo "--- $f"; cat "$f"; }; done
  echo "FAIL: tf_cnn_benchmarks' parsers or train_and_eval checks failed on cnnbench's output (above)"
  exit 1
fi
echo PASS
