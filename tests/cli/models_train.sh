#!/usr/bin/env bash
# Every model trains on the cpu device: at batch 2 on fixed synthetic labels its loss
# falls over 10 steps (the ResNets and MobileNet at 64x64, below). This catches wiring errors a parameter count cannot (a branch
# that is built but not connected, a gradient that never reaches a layer).
# The slowest test (several minutes on 2 cores); it runs models two at a time. NASNet
# trains in cli/nasnet.sh instead, at smaller image sizes (at 224 it alone would add a
# minute).
set -uo pipefail
: "${CNNBENCH:?}"
imagenet=(trivial lenet alexnet overfeat googlenet vgg11 vgg16 vgg19 inception3 inception4
          resnet50 resnet50_v1.5 resnet50_v2 resnet101 resnet101_v2 resnet152 resnet152_v2 mobilenet
          official_resnet18 official_resnet34 official_resnet50 official_resnet101
          official_resnet152 official_resnet200 official_resnet18_v2 official_resnet34_v2
          official_resnet50_v2 official_resnet101_v2 official_resnet152_v2 official_resnet200_v2)
cifar=(trivial alexnet resnet20 resnet20_v2 resnet32 resnet32_v2 resnet44 resnet44_v2 resnet56
       resnet56_v2 resnet110 resnet110_v2 densenet40_k12 densenet100_k12 densenet100_k24)
# Under the sanitizers (CNNB_SANITIZE=1) one depth per family: a deeper ResNet or DenseNet
# runs the same code as its shallowest sibling, only more of it, and at sanitizer speed
# the deep ones were most of CI's time.
if [ "${CNNB_SANITIZE:-0}" = 1 ]; then
  shallow() { local m; for m in "$@"; do
    case "$m" in resnet101* | resnet152* | resnet110* | resnet56* | resnet44* | official_resnet101* | \
      official_resnet152* | official_resnet200* | densenet100*) ;; *) echo "$m" ;; esac; done; }
  mapfile -t imagenet < <(shallow "${imagenet[@]}")
  mapfile -t cifar < <(shallow "${cifar[@]}")
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# The ImageNet ResNets and MobileNet end in a global pool, so they build at any size: at
# 64x64 (2x2 before the pool) they take a twelfth of 224's FLOPs, the same layers and
# wiring (the deep ResNets at 224 were most of this test's ~11 minutes on 2 AVX2 cores).
# The others end in dense layers sized for their own input, so they train at it.
size_of() { # size_of <dataset> <model>: the --image_size flag to train at, or nothing
  case "$1:$2" in
    # official_resnet200 (v1, no pre-activation) at batch 2 diverges below 224 in 10 steps
    imagenet:official_resnet200) ;;
    imagenet:resnet* | imagenet:official_resnet* | imagenet:mobilenet) echo "--image_size=64" ;;
  esac
}

train() { # train <dataset> <model>: writes "<first> <last>" or the error to $tmp/<dataset>_<model>
  local out="$tmp/$1_$2"
  # shellcheck disable=SC2046 # size_of prints one flag or nothing
  if "$CNNBENCH" --model="$2" --data_name="$1" $(size_of "$1" "$2") --batch_size=2 --num_batches=10 \
       --num_warmup_batches=0 --display_every=1 --optimizer=momentum --init_learning_rate=0.001 \
       --num_intra_threads=1 >"$out.log" 2>&1; then
    awk -F'\t' '$1 == 1 {f = $3} $1 == 10 {l = $3} END {print f, l}' "$out.log" >"$out"
  else
    echo "error" >"$out"
  fi
}

jobs=()
for m in "${imagenet[@]}"; do jobs+=("imagenet $m"); done
for m in "${cifar[@]}"; do jobs+=("cifar10 $m"); done
running=0
for job in "${jobs[@]}"; do
  train $job &
  running=$((running + 1))
  if [ "$running" -ge 2 ]; then wait -n; running=$((running - 1)); fi
done
wait

failures=0
for job in "${jobs[@]}"; do
  set -- $job
  read -r first last <"$tmp/$1_$2"
  if [ "$first" = "error" ] || [ -z "${last:-}" ]; then
    echo "FAIL: $2 ($1) did not run:"; tail -5 "$tmp/$1_$2.log"; failures=$((failures + 1))
  elif awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }'; then
    echo "ok   $2 ($1): loss $first -> $last"
  else
    echo "FAIL: $2 ($1): loss did not fall: $first -> $last"; failures=$((failures + 1))
  fi
done
[ "$failures" -eq 0 ] && echo "PASS: ${#jobs[@]} models" || exit 1
