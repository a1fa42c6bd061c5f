# Sourced by tests that read evaluations during training from a report.
#
# eval_lines FILE: one line per evaluation, "Step G: Accuracy @ 1 = X Accuracy @ 5 = Y [N
# examples]". tf_cnn_benchmarks' report (and cnnbench's) prints "Running evaluation at
# global_step G" ("Running final evaluation at global_step G" for the last), then the
# evaluation's "B<TAB>R examples/sec" lines, then the accuracy line without a step; this
# joins each accuracy line to the global step it was announced with, so a test can grep one
# line per evaluation. An accuracy line with no announcement before it is left out (a test
# counting evaluations then sees it missing).
eval_lines() {
  awk '/^Running (final )?evaluation at global_step [0-9]+$/ { g = $NF; next }
       /^Accuracy @ 1 = / && g != "" { print "Step " g ": " $0; g = "" }' "$1"
}
