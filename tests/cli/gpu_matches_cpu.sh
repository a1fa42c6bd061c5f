#!/usr/bin/env bash
# Label gpu (tests/CMakeLists.txt: every cli/gpu_*.sh; cuda_fake on the fake CUDA, where
# the models and sizes differ: below). 20 steps of ResNet-50 at batch 4
# on synthetic data train to the same loss curve on the cpu and the cuda device: the
# same initial weights (the host initializes them), the same batches, the same update.
# Tolerances per step, |loss_cuda - loss_cpu| <= tol * (1 + |loss_cpu|):
#   fp32 with TF32 forbidden (--nocuda_allow_tf32),
#   NCHW and NHWC (--data_format):                   2e-3  (summation order only, grown
#                                                         over 20 steps of momentum SGD)
#   fp16 (NHWC, tensor cores, fp32 master weights): 5e-2  against cpu fp32
# Skips (77), saying why, where the cuda device cannot run.
set -uo pipefail
: "${CNNBENCH:?}"
why=$("$CNNBENCH" --list_plugins 2>&1 | sed -n '/^Devices that cannot run on this machine:/,/^$/p' | grep '^  cuda: ')
"$CNNBENCH" --list_plugins 2>&1 | grep -Eq "^  device +cuda +" || { echo "SKIP: the cuda device is not built here"; exit 77; }
[ -z "$why" ] || { echo "SKIP: the cuda device cannot run here:${why#  cuda:}"; exit 77; }
"$CNNBENCH" --list_plugins 2>&1 | grep -Eq "^  device +cpu +" \
  || { echo "SKIP: the cpu device is not built here (oneDNN missing): nothing to compare with"; exit 77; }
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
failures=0
steps=20
common=(--model=resnet50 --batch_size=4 --num_warmup_batches=0 --display_every=1
        --init_learning_rate=0.005 --optimizer=momentum --seed=7)
# On the fake CUDA (CNNB_CUDA_FAKE=1: its cuDNN computes with the reference ops, on the
# CPU) ResNet-50 is too slow for a curve, and at the sizes that fit, chaotic: at batch 2
# of 64-pixel images a ReLU input within rounding of 0 flips its mask element, and batch
# norm over 8 values spreads that through a channel, so flipping the last bit of conv1's
# weights moves the cpu device's own gradients by percents. There the curve is ResNet-20's
# on CIFAR-10-shaped data (residual blocks, batch norm, fused ReLUs, 3 precisions and
# layouts), and the big models' first loss (the forward, the same weights) is compared
# alone, below.
if [ "${CNNB_CUDA_FAKE:-0}" = 1 ]; then
  steps=8
  common=(--model=resnet20 --data_name=cifar10 --batch_size=4 --num_warmup_batches=0
          --display_every=1 --init_learning_rate=0.005 --optimizer=momentum --seed=7)
fi
common+=(--num_batches=$steps)

losses() { # losses <log dir>: one loss per line, in step order
  grep -h '"record":"step"' "$1"/benchmark_run.rank0.jsonl | grep -o '"loss":[-0-9.eE+]*' | cut -d: -f2
}
run() { # run <name> args...: cnnbench's benchmark log in $dir/<name>
  local name=$1; shift
  timeout 600 "$CNNBENCH" "${common[@]}" --benchmark_log_dir="$dir/$name" "$@" >"$dir/$name.out" 2>&1 \
    || { echo "FAIL: cnnbench $* exited $?:"; tail -5 "$dir/$name.out"; failures=$((failures + 1)); return 1; }
}
compare() { # compare <a> <b> <tol>
  paste <(losses "$dir/$1") <(losses "$dir/$2") | awk -v tol="$3" -v a="$1" -v b="$2" -v steps="$steps" '
    { n++; d = $1 - $2; if (d < 0) d = -d; m = $1 < 0 ? -$1 : $1; lim = tol * (1 + m)
      if (d > worst) worst = d
      printf "step %2d  %-12s %.6f  %-12s %.6f  |diff| %.2e  (limit %.2e)\n", n, a, $1, b, $2, d, lim
      if (d > lim || $2 != $2) bad++ }
    END { if (n != steps) { print "want " steps " steps, got " n; exit 1 } exit bad > 0 }' \
    || { echo "FAIL: $2 does not follow $1 within $3 * (1 + |loss|)"; failures=$((failures + 1)); }
}

run cpu --device=cpu && run cuda_fp32 --device=cuda --nocuda_allow_tf32 && compare cpu cuda_fp32 2e-3
# fp32 in NHWC (the layout TF32 runs in on sm_80+), TF32 off: the layout alone changes
# nothing but summation order.
[ -e "$dir/cpu" ] && run cuda_nhwc --device=cuda --nocuda_allow_tf32 --data_format=NHWC &&
  compare cpu cuda_nhwc 2e-3
[ -e "$dir/cpu" ] && run cuda_fp16 --device=cuda --use_fp16 && compare cpu cuda_fp16 5e-2
# --cuda_graphs: from step 3 on every step replays the recording (step 3's own included):
# the same work in the same order, so the curve is the plain fp32 run's (up to cuDNN's
# choice of algorithm, made again in each run).
if [ -e "$dir/cuda_fp32" ] && run cuda_graphs --device=cuda --nocuda_allow_tf32 --cuda_graphs; then
  compare cuda_fp32 cuda_graphs 1e-5
  grep -q -- "--cuda_graphs: 1 recording(s), $((steps - 2)) of $steps steps replayed" \
    "$dir/cuda_graphs.out" ||
    { echo "FAIL: --cuda_graphs replayed no recording: $(grep -- --cuda_graphs "$dir/cuda_graphs.out")"
      failures=$((failures + 1)); }
fi

# The fake's big models: one step each, its loss (the forward of the initial weights) on
# both devices within 1e-4 (fp32, TF32 off); the step's backward and update must run.
first_loss() { # first_loss <name> <model> <image size> <batch> [flag]: step 1's loss on both devices
  local name=$1 model=$2 size=$3 batch=$4 d
  for d in cpu cuda; do
    timeout 600 "$CNNBENCH" --model="$model" --image_size="$size" --batch_size="$batch" --num_batches=1 \
      --num_warmup_batches=0 --display_every=1 --seed=7 --device=$d --nocuda_allow_tf32 ${5:+"$5"} \
      --benchmark_log_dir="$dir/$name-$d" >"$dir/$name-$d.out" 2>&1 ||
      { echo "FAIL: $model on $d exited $?:"; tail -5 "$dir/$name-$d.out"; failures=$((failures + 1)); return; }
  done
  paste <(losses "$dir/$name-cpu") <(losses "$dir/$name-cuda") | awk -v m="$model" '
    { d = $1 - $2; if (d < 0) d = -d; lim = 1e-4 * (1 + ($1 < 0 ? -$1 : $1)); n++
      printf "%-12s step 1 loss  cpu %.6f  cuda %.6f  |diff| %.2e  (limit %.2e)\n", m, $1, $2, d, lim
      if (d > lim || $2 != $2) bad++ }
    END { exit n != 1 || bad > 0 }' || { echo "FAIL: $model's first loss differs"; failures=$((failures + 1)); }
}
if [ "${CNNB_CUDA_FAKE:-0}" = 1 ]; then
  # (Inception-v3 and VGG16 fix their input size: their last layers want 8x8 and 7x7.
  # VGG16 trains with dropout, whose masks each device draws its own way: its loss is
  # compared in inference.)
  first_loss resnet50 resnet50 64 2
  first_loss inception3 inception3 299 1
  first_loss vgg16 vgg16 224 1 --forward_only
  first_loss nasnet nasnet 64 2
fi
[ "$failures" -eq 0 ] && echo "PASS: gpu_matches_cpu" || exit 1
