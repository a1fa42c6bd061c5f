#!/usr/bin/env bash
# Cross-framework check (issue 11's correctness oracle): the same weights give the same
# logits in cnnbench and in PyTorch, both ways, fp32 on the cpu device, eval mode.
#  1. torchvision -> cnnbench: a torchvision resnet50 with random weights and random
#     batch-norm statistics, its state_dict saved with safetensors, loaded into
#     cnnbench's resnet50_v1.5 (checkpoint_logits: cnnb_checkpoint_load_model_file);
#     both run the same batch.
#  2. cnnbench -> torchvision: a checkpoint cnnbench wrote (one training step with
#     --train_dir) loads into torchvision's resnet50 with a strict load_state_dict (the
#     "optimizer." slots dropped), and both run the same batch with it.
# Tolerance: |cnnbench - torch| <= 1e-4 * (1 + max |torch logit|) per logit (fp32; the
# two sum convolutions in other orders: seen ~1e-6 of the largest logit, while v1's
# stride placement or torchvision's own max pool padding miss by 5-25%). Images are 64x64 to keep the test fast: the
# ResNet is fully convolutional up to its global mean, so every layer is exercised.
#
# One difference is bridged on the PyTorch side, not hidden: tf_cnn_benchmarks' stem max
# pool is 3x3/2 SAME, which at an even size pads one row and column at the bottom and
# right only, where torchvision's MaxPool2d(3, 2, padding=1) pads one on every side
# (other windows). The reference replaces it by ZeroPad2d((0, 1, 0, 1)) + MaxPool2d(3, 2):
# TF pads with -inf, but the pool follows a ReLU, so zero padding takes the same maxima.
# The 7x7/2 stem and the 3x3/2 convolutions pad symmetrically in both (tf_cnn_benchmarks'
# explicit SAME_RESNET padding), and v1.5 strides the 3x3 as torchvision does.
#
# Needs PyTorch, torchvision and safetensors in $CNNB_PYTHON (default
# /work/anchors/bin/python when it exists, else python3): skips (77) without them.
set -uo pipefail
: "${CNNB_BUILD_DIR:?}" "${CHECKPOINT_LOGITS:?}"
cnnbench="$CNNB_BUILD_DIR/bin/cnnbench"
py=${CNNB_PYTHON:-}
if [ -z "$py" ]; then
  if [ -x /work/anchors/bin/python ]; then py=/work/anchors/bin/python; else py=python3; fi
fi
command -v "$py" >/dev/null 2>&1 || {
  echo "SKIP: no Python '$py' (set CNNB_PYTHON to a Python with torch, torchvision, safetensors)"
  exit 77
}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
BATCH=2 SIZE=64

# PyTorch is imported once (it takes seconds): after cnnbench trained and saved, one
# Python run makes torchvision's model and batch, and computes torchvision's logits for
# both weight sets; checkpoint_logits then computes cnnbench's, and numpy compares.
cat > "$work/torch_side.py" <<'PY'
import sys
try:
    import numpy as np, torch, torch.nn as nn, torchvision.models as tvm
    from safetensors.torch import load_file, save_file
except ImportError as e:
    print("SKIP: %s cannot import torch, torchvision, numpy and safetensors (%s); set "
          "CNNB_PYTHON to a Python with them" % (sys.executable, e))
    sys.exit(77)
torch.set_num_threads(2)
work, batch, size, ckpt = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]

def model():
    m = tvm.resnet50(num_classes=1001)
    # tf_cnn_benchmarks' SAME max pool: bottom/right padding only (see the script's header).
    m.maxpool = nn.Sequential(nn.ZeroPad2d((0, 1, 0, 1)), nn.MaxPool2d(3, 2))
    return m.eval()

def logits(m, images):
    with torch.no_grad():
        return m(torch.from_numpy(images)).numpy()

images = np.random.default_rng(11).standard_normal((batch, 3, size, size)).astype(np.float32)
images.tofile("%s/images.f32" % work)

# 1. Random weights, and batch-norm scales, offsets and statistics far from their initial
# 1/0 so that a statistic loaded into the wrong slot shows. The state_dict is saved as
# torchvision names it (the replaced max pool has no parameters).
torch.manual_seed(11)
m = model()
with torch.no_grad():
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            mod.weight.uniform_(0.5, 1.5)
            mod.bias.normal_(0.0, 0.1)
            mod.running_mean.normal_(0.0, 0.1)
            mod.running_var.uniform_(0.5, 1.5)
save_file({k: v.contiguous() for k, v in m.state_dict().items()},
          "%s/torchvision.safetensors" % work)
logits(m, images).tofile("%s/torch_from_torch.f32" % work)

# 2. cnnbench's checkpoint, strictly: every key torchvision has, no other (the optimizer's
# slots aside); load_state_dict raises naming the keys otherwise.
state = {k: v for k, v in load_file(ckpt).items() if not k.startswith("optimizer.")}
m = model()
m.load_state_dict(state, strict=True)
logits(m, images).tofile("%s/torch_from_cnnbench.f32" % work)
PY

cat > "$work/compare.py" <<'PY'
import sys
import numpy as np
work, what, ours, theirs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
a = np.fromfile("%s/%s" % (work, ours), dtype=np.float32)
b = np.fromfile("%s/%s" % (work, theirs), dtype=np.float32)
if a.shape != b.shape or b.size == 0:
    print("FAIL: %s: %d cnnbench logits, %d torch logits" % (what, a.size, b.size))
    sys.exit(1)
tol = 1e-4 * (1.0 + float(np.abs(b).max()))
diff = float(np.abs(a - b).max())
print("%s: max |cnnbench - torch| = %.3g (tolerance %.3g, max |logit| %.3g)"
      % (what, diff, tol, float(np.abs(b).max())))
sys.exit(0 if np.isfinite(a).all() and diff <= tol else 1)
PY

# cnnbench trains one step (so its statistics moved from their initial values) and saves.
if ! "$cnnbench" --model=resnet50_v1.5 --device=cpu --batch_size=$BATCH --image_size=$SIZE \
     --num_batches=1 --num_warmup_batches=0 --train_dir="$work/train" > "$work/train.log" 2>&1; then
  cat "$work/train.log"
  echo "FAIL: cnnbench could not train a step with --train_dir"
  exit 1
fi
ckpt=$(ls "$work"/train/model.ckpt-*.safetensors 2>/dev/null | tail -n 1)
[ -n "$ckpt" ] || { echo "FAIL: cnnbench --train_dir wrote no model.ckpt-*.safetensors"; exit 1; }

"$py" "$work/torch_side.py" "$work" $BATCH $SIZE "$ckpt"
rc=$?
[ "$rc" -eq 77 ] && exit 77
[ "$rc" -eq 0 ] || { echo "FAIL: the torchvision side failed (above): a strict load of $ckpt?"; exit 1; }

logits() { # checkpoint, output
  "$CHECKPOINT_LOGITS" --model=resnet50_v1.5 --checkpoint="$1" --images="$work/images.f32" \
    --batch=$BATCH --image_size=$SIZE --num_classes=1001 --out="$work/$2"
}
# 1. torchvision -> cnnbench.
if logits "$work/torchvision.safetensors" cnnbench_from_torch.f32; then
  "$py" "$work/compare.py" "$work" "torchvision's weights" cnnbench_from_torch.f32 \
    torch_from_torch.f32 || fail "torchvision's weights do not give torchvision's logits in cnnbench"
else
  fail "checkpoint_logits could not load torchvision's state_dict"
fi
# 2. cnnbench -> torchvision.
if logits "$ckpt" cnnbench_own.f32; then
  "$py" "$work/compare.py" "$work" "cnnbench's checkpoint" cnnbench_own.f32 \
    torch_from_cnnbench.f32 || fail "cnnbench's checkpoint does not give cnnbench's logits in torchvision"
else
  fail "checkpoint_logits could not load cnnbench's own checkpoint"
fi

[ "$failures" -eq 0 ] || exit 1
echo "OK: resnet50_v1.5's logits agree with torchvision's resnet50, both ways"
