#!/usr/bin/env bash
# torchvision_zoo_train.sh — every model of contrib/torchvision_zoo, built out of tree
# against this build's install (tests/support/zoo_build.sh) and loaded from
# CNNB_PLUGIN_PATH, trains with a falling loss:
#  - on synthetic ImageNet-shaped data (64x64: the networks pool globally), one fixed
#    batch, so the loss must fall step by step as it is learned;
#  - on real data: the Fashion-MNIST photographs (28x28, one channel: the stem takes one
#    channel) for every model whose strides take 28x28, and CIFAR-10 files this test makes
#    (32x32) for those that need 32 (densenet121, convnext_tiny), which refuse
#    Fashion-MNIST by name: checked too. Real batches differ from step to step, so the test compares the mean
#    loss of the last 20 of 80 steps with that of the first 8 (SqueezeNet, the slowest
#    to start, falls 4-13% there; the rest 10-50%).
# Adam at 0.001 for all (total_loss includes the L2 term): the point is that every op's
# gradient reaches every parameter, not each model's best recipe (SGD at one rate for all
# diverges on some and stalls others).
# Then cnnbench-tune, installed beside that cnnbench, searches two zoo models (a small
# space and budget): each gets a ranked row in its report and a flagfile that reruns.
set -uo pipefail
: "${CNNB_BUILD_DIR:?run through ctest}" "${CNNB_SOURCE_DIR:?run through ctest}"
: "${MAKE_CIFAR:?run through ctest}"
command -v cmake >/dev/null || { echo "SKIP: cmake not on PATH"; exit 77; }
fmnist=/usr/share/datasets/fashion-mnist
[[ -r $fmnist/train-images-idx3-ubyte.gz || -r $fmnist/train-images-idx3-ubyte ]] || {
  echo "SKIP: no Fashion-MNIST in $fmnist (Debian's dataset-fashion-mnist)"
  exit 77
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=../support/zoo_build.sh
. "$CNNB_SOURCE_DIR/tests/support/zoo_build.sh"
zoo_build "$tmp" || exit 1
mkdir "$tmp/cifar" && "$MAKE_CIFAR" "$tmp/cifar" 512 64 >"$tmp/cifar.log" 2>&1 || {
  cat "$tmp/cifar.log"
  echo "FAIL: make_cifar"
  exit 1
}
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# Trains model $1 for $2 steps with the remaining flags; prints the losses, one per step.
losses() { # MODEL STEPS FLAGS...
  local m=$1 steps=$2
  shift 2
  zoo_cnnbench --model="$m" --device=cpu --num_batches="$steps" --num_warmup_batches=0 \
    --display_every=1 --optimizer=adam "$@" >"$tmp/run.out" 2>&1 || {
    tail -n 5 "$tmp/run.out"
    return 1
  }
  awk -F'\t' '/^[0-9]+\timages\/sec:/ { print $3 }' "$tmp/run.out"
}

# The mean of the first k losses, the mean of the last j, and whether the second is lower
# by the fraction f of the first.
falls() { # K J F < LOSSES
  awk -v k="$1" -v j="$2" -v f="$3" 'NR > 0 { v[NR] = $1 } END {
      if (NR < k + j) exit 1
      for (i = 1; i <= k; i++) a += v[i]
      for (i = 1; i <= j; i++) b += v[NR - j + i]
      printf "%.3f -> %.3f", a / k, b / j
      exit !(b / j < (1 - f) * a / k) }'
}

for m in $zoo_models; do
  # Synthetic: the same batch every step.
  if out=$(losses "$m" 8 --batch_size=8 --image_size=64 --init_learning_rate=0.001); then
    if trend=$(falls 2 2 0.1 <<<"$out"); then
      echo "$m, synthetic: loss $trend"
    else
      fail "$m on synthetic data: the loss does not fall: $(tr '\n' ' ' <<<"$out")"
    fi
  else
    fail "$m on synthetic data: $out"
  fi
  # Real data: Fashion-MNIST, or CIFAR-10 for a model that refuses 28x28 (exit 2, naming
  # the sizes, before anything is allocated).
  data=(--data_dir="$fmnist") what="Fashion-MNIST"
  zoo_cnnbench --model="$m" --data_dir="$fmnist" --model_info >"$tmp/fit.out" 2>&1
  rc=$?
  if [[ $rc != 0 ]]; then
    grep -q "fashion_mnist's 28x28 images are too small: its strides need at least" \
      "$tmp/fit.out" && [[ $rc == 2 ]] ||
      fail "$m on Fashion-MNIST: exit $rc: $(tail -n 2 "$tmp/fit.out")"
    data=(--data_dir="$tmp/cifar" --data_name=cifar10) what="CIFAR-10"
  fi
  if out=$(losses "$m" 80 --batch_size=16 --init_learning_rate=0.001 "${data[@]}"); then
    if trend=$(falls 8 20 0.03 <<<"$out"); then
      echo "$m, $what: loss $trend"
    else
      fail "$m on $what: the loss does not fall: $(tr '\n' ' ' <<<"$out")"
    fi
  else
    fail "$m on $what: $out"
  fi
done
# An image the strides cannot take: the builder's error, naming the node, and exit 2, not
# a crash in the plugin (the zoo reads a failed tensor's channels as 0, zoo_channels).
zoo_cnnbench --model=convnext_tiny --image_size=16 --num_batches=1 --batch_size=2 \
  >"$tmp/tiny.out" 2>&1
rc=$?
[[ $rc == 2 ]] && grep -q "building model convnext_tiny.*conv2d 'features.6.1'" "$tmp/tiny.out" ||
  fail "convnext_tiny at 16x16: want exit 2 naming the conv that does not fit, got $rc: $(tail -n 2 "$tmp/tiny.out")"
# The tuner runs zoo models as it runs any: its children find them on CNNB_PLUGIN_PATH.
cat >"$tmp/space" <<'SPACE'
variable_update = replicated, horovod
precision = fp32
batch_size = 8, 16
image_size := 32
num_intra_threads = 0
SPACE
if ! CNNB_PLUGIN_PATH="$zoo_dir" \
  "$zoo_prefix/bin/cnnbench-tune" --models=squeezenet1_1,mobilenet_v3_small --space="$tmp/space" \
  --processes=1 --budget=60s --out="$tmp/tuned" >"$tmp/tune.out" 2>&1; then
  fail "cnnbench-tune on two zoo models: $(tail -n 5 "$tmp/tune.out")"
else
  for m in squeezenet1_1 mobilenet_v3_small; do
    grep -q "^| $m | " "$tmp/tuned/report.md" || fail "cnnbench-tune: no best row for $m in report.md"
    if ! CNNB_PLUGIN_PATH="$zoo_dir" "$zoo_prefix/bin/cnnbench" --flagfile="$tmp/tuned/$m.flags" \
      --num_batches=1 --num_warmup_batches=0 >"$tmp/rerun.out" 2>&1; then
      fail "cnnbench --flagfile=$m.flags (the tuner's winner): $(tail -n 3 "$tmp/rerun.out")"
    fi
  done
  echo "cnnbench-tune: $(grep -c '^| [a-z]' "$tmp/tuned/report.md") rows; winners rerun"
fi
[[ $failures -eq 0 ]] || exit 1
echo "OK: every zoo model trains, its loss falling, on synthetic and real data; the tuner runs them"
