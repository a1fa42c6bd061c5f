#!/usr/bin/env bash
# --model_info prints the per-layer table and machine-readable totals, without training
# and without needing a device plugin, and the model's training recipe: the tf models
# have none of their own (tf_cnn_benchmarks' flags' defaults stand; the zoo's recipes are
# checked by cli/torchvision_zoo.sh, the recipe's arithmetic by unit/run/test_recipe.c).
set -euo pipefail
: "${CNNBENCH:?}"
check() { # check <model> <params>
  local out; out=$("$CNNBENCH" --model="$1" --model_info --device=none_needed)
  grep -qx "Trainable parameters: $2" <<<"$out" || { echo "FAIL: $1: want $2 params"; echo "$out" | tail -3; exit 1; }
  grep -qP '^Forward GFLOPs per image: \d+\.\d{3}$' <<<"$out" || { echo "FAIL: $1: no GFLOPs line"; exit 1; }
  grep -qP '^Activation memory per image \(training\): \d+\.\d MiB$' <<<"$out" || { echo "FAIL: $1: no memory line"; exit 1; }
  grep -q "^Training recipe: none of the model's own" <<<"$out" || { echo "FAIL: $1: no recipe line"; exit 1; }
}
check alexnet 61842345
check vgg16 138361641
check resnet50 25559081
check inception3 23819401
check official_resnet18 11694249
check official_resnet200_v2 64668201
check nasnet 5291035 # cli/nasnet.sh says where the NASNet counts come from
check nasnetlarge 88757183
out=$("$CNNBENCH" --model=resnet50 --model_info --num_classes=10)
grep -qx "Trainable parameters: $((25559081 - 2048 * 991 - 991))" <<<"$out" || { echo "FAIL: --num_classes=10"; exit 1; }
echo PASS
