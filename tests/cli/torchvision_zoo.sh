#!/usr/bin/env bash
# torchvision_zoo.sh — contrib/torchvision_zoo as a third party builds and ships it, and
# each of its models equal to torchvision's own:
#  1. install this build into a temporary prefix, build the zoo against that install with
#     find_package(CNNBench) alone (no include path into the source or build tree), and
#     list its models from CNNB_PLUGIN_PATH;
#  2. per model, against torchvision's model of the same name and 1001 classes: the same
#     number of trainable parameters; forward FLOPs at 224x224 within 3% of
#     torch.utils.flop_counter's; and the same weights give the same eval-mode logits
#     (fp32, 96x96, |cnnbench - torch| <= 1e-4 * max |torch logit|) both ways:
#     a. torchvision -> cnnbench: torchvision's model with random weights, batch-norm
#        scales, offsets and statistics far from 1 and 0 (so that one in the wrong slot
#        shows; its logits must reach 0.01, or the comparison would say little), saved
#        with safetensors and loaded by checkpoint_logits;
#     b. cnnbench -> torchvision: cnnbench trains one step and saves (--train_dir),
#        torchvision loads that file with a strict load_state_dict;
#  3. and the same training: from a.'s weights, two steps on one batch (batch norm on the
#     batch's statistics, momentum 0.9, no weight decay, dropout and stochastic depth
#     off: random masks cannot agree) give the same two losses within 1e-4 relative; the
#     second loss proves the gradients and the update, and it must move from the first
#     by more than 20 times that, or the comparison would say little. PyTorch runs in
#     float64 (the truth; fp32 PyTorch is itself further from it than cnnbench), at the
#     learning rate that lowers the model's loss by 0.2 to first order
#     (torch_side.py's train_losses says why). Images are 96x96: at 64x64 the last
#     stage's batch norm sees 8 values a channel, too few for a well-conditioned gradient;
#  4. the recipe: --model_info shows it, a training run takes its optimizer, and its
#     learning-rate schedule, as the host runs it with no rate flag (model_lr_schedule),
#     equals torchvision's train.py schedulers (StepLR; LinearLR warm-up then
#     CosineAnnealingLR, stepped once an epoch) or, for the recipes torchvision ported,
#     the source's per-step rule (TF's warm-up and staircase decay for EfficientNet,
#     ShuffleNet's linear decay), at ImageNet's epoch and a global batch of 256, at every
#     epoch's first and last step over the recipe's length, within 1e-6 relative.
# Needs torch and torchvision in $CNNB_PYTHON (skips, 77, without them).
set -uo pipefail
: "${CNNB_BUILD_DIR:?run through ctest}" "${CNNB_SOURCE_DIR:?run through ctest}"
: "${CHECKPOINT_LOGITS:?run through ctest}" "${MODEL_LR_SCHEDULE:?run through ctest}"
command -v cmake >/dev/null || { echo "SKIP: cmake not on PATH"; exit 77; }
py=${CNNB_PYTHON:-python3}
"$py" -c 'import torch, torchvision, safetensors, numpy' 2>/dev/null || {
  echo "SKIP: $py cannot import torch, torchvision, safetensors and numpy (set CNNB_PYTHON)"
  exit 77
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
die() {
  echo "FAIL: $*"
  exit 1
}
# shellcheck source=../support/zoo_build.sh
. "$CNNB_SOURCE_DIR/tests/support/zoo_build.sh"

# ---- 1. the zoo, built against the install alone ------------------------------------------
zoo_build "$tmp" || exit 1
models=$zoo_models zoo=$zoo_dir
cnnbench() { zoo_cnnbench "$@"; }
echo "zoo models: $(tr '\n' ' ' <<<"$models")"

# ---- 2. each model against torchvision ------------------------------------------------------
BATCH=2 SIZE=96 TRAIN_STEPS=2 TRAIN_DROP=0.2
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
for m in $models; do
  cnnbench --model="$m" --model_info >"$tmp/$m.info" 2>&1 || {
    fail "$m: --model_info: $(tail -n 3 "$tmp/$m.info")"
    continue
  }
  # torchvision's recipe (or the paper's) as the model's defaults, and training takes them.
  grep -q "^Training recipe: .*weight decay" "$tmp/$m.info" &&
    grep -q "^Recipe defaults: --optimizer=" "$tmp/$m.info" ||
    fail "$m: --model_info shows no training recipe: $(grep -i recipe "$tmp/$m.info")"
  if ! cnnbench --model="$m" --device=cpu --batch_size=$BATCH --image_size=$SIZE \
    --num_batches=1 --num_warmup_batches=0 --train_dir="$tmp/train_$m" >"$tmp/$m.train" 2>&1; then
    fail "$m: one training step with --train_dir: $(tail -n 5 "$tmp/$m.train")"
    continue
  fi
  recipe_optimizer=$(sed -n 's/^Recipe defaults: --optimizer=\([a-z]*\).*/\1/p' "$tmp/$m.info")
  grep -q "training recipe sets optimizer $recipe_optimizer" "$tmp/$m.train" &&
    grep -qx "Optimizer:   $recipe_optimizer" "$tmp/$m.train" ||
    fail "$m: training did not take the recipe's optimizer $recipe_optimizer"
  ckpt=$(ls "$tmp/train_$m"/model.ckpt-*.safetensors 2>/dev/null | tail -n 1)
  [[ -n "$ckpt" ]] || {
    fail "$m: --train_dir wrote no model.ckpt-*.safetensors"
    continue
  }
  echo "$m $ckpt" >>"$tmp/models.list"
done
[[ -f "$tmp/models.list" ]] || die "no model trained (above)"

# torchvision's side, once for every model (importing torch takes seconds): its logits for
# the same batch with cnnbench's weights, its parameter count and FLOPs.
cat >"$tmp/torch_side.py" <<'PY'
import sys
import numpy as np, torch, torchvision.models as tvm
from safetensors.torch import load_file, save_file
from torch.utils.flop_counter import FlopCounterMode
torch.set_num_threads(2)
work, batch, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
TRAIN_STEPS, TRAIN_DROP = int(sys.argv[4]), float(sys.argv[5])
rng = np.random.default_rng(7)
images = rng.standard_normal((batch, 3, size, size)).astype(np.float32)
images.tofile("%s/images.f32" % work)
labels = rng.integers(0, 1001, batch).astype(np.int32)
labels.tofile("%s/labels.i32" % work)

def train_losses(model, steps, drop):
    """The oracle's steps, as checkpoint_logits --train_steps takes them, at the learning
    rate that lowers the loss by `drop` to first order (drop / |g|^2, g the gradient at
    the start): the models' gradients differ by orders of magnitude, and one rate for all
    would leave some steps in the noise and throw others far past the linear regime,
    where a ReLU whose input is within rounding of 0 (on one side in one framework, on
    the other in the other) changes the next loss by more than any tolerance.
    In float64: the truth, not another fp32 answer. With batch norm on two images'
    statistics these networks are ill-conditioned enough that PyTorch's own fp32
    gradients miss float64's by 1% at RegNet's stem (cnnbench's by 0.02%), so fp32
    against fp32 would measure PyTorch's rounding as much as cnnbench's."""
    for mod in model.modules():
        if isinstance(mod, torch.nn.Dropout) or type(mod).__name__ == "StochasticDepth":
            mod.p = 0.0
    model.double().train()
    x, y = torch.from_numpy(images).double(), torch.from_numpy(labels).long()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    lr = drop / float(sum((p.grad.double() ** 2).sum() for p in model.parameters()))
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return lr, losses
for line in open("%s/models.list" % work):
    name, ckpt = line.split()
    model = getattr(tvm, name)(num_classes=1001).eval()
    params = sum(p.numel() for p in model.parameters())
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(torch.zeros(1, 3, 224, 224))
    # a. random weights; batch-norm scales, offsets and statistics far from their
    # initial 1 and 0, so that one loaded into the wrong slot shows.
    torch.manual_seed(7)
    random = getattr(tvm, name)(num_classes=1001).eval()
    with torch.no_grad():
        for mod in random.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.normal_(0.0, 0.1)
                mod.running_mean.normal_(0.0, 0.1)
                mod.running_var.uniform_(0.5, 1.5)
        save_file({k: v.contiguous() for k, v in random.state_dict().items()},
                  "%s/torch_weights_%s.safetensors" % (work, name))
        random(torch.from_numpy(images)).numpy().tofile("%s/torch_own_%s.f32" % (work, name))
    lr, losses = train_losses(random, TRAIN_STEPS, TRAIN_DROP)
    print("%.9g" % lr, file=open("%s/torch_lr_%s.txt" % (work, name), "w"))
    with open("%s/torch_train_%s.txt" % (work, name), "w") as out:
        out.writelines("%.9g\n" % l for l in losses)
    # b. cnnbench's checkpoint, strictly.
    state = {k: v for k, v in load_file(ckpt).items() if not k.startswith("optimizer.")}
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as e:
        print("%s: strict load of %s: %s" % (name, ckpt, str(e)[:2000]))
        continue
    with torch.no_grad():
        model(torch.from_numpy(images)).numpy().tofile("%s/torch_%s.f32" % (work, name))
    print("%s %d %.6f" % (name, params, counter.get_total_flops() / 1e9),
          file=open("%s/torch_%s.facts" % (work, name), "w"))
PY
"$py" "$tmp/torch_side.py" "$tmp" $BATCH $SIZE $TRAIN_STEPS $TRAIN_DROP 2>&1 | grep -v "UserWarning\|warnings.warn" ||
  true

cat >"$tmp/compare.py" <<'PY'
import sys
import numpy as np
ours, theirs, least = sys.argv[1], sys.argv[2], float(sys.argv[3])
a, b = np.fromfile(ours, dtype=np.float32), np.fromfile(theirs, dtype=np.float32)
if a.shape != b.shape or b.size == 0:
    print("%d cnnbench logits, %d torch logits" % (a.size, b.size)); sys.exit(1)
if not float(np.abs(b).max()) >= least:
    print("torch's logits are at most %.3g: too small to compare" % float(np.abs(b).max()))
    sys.exit(1)
tol = 1e-4 * float(np.abs(b).max())
diff = float(np.abs(a - b).max())
print("max |cnnbench - torch| = %.3g (tolerance %.3g, max |logit| %.3g)" % (diff, tol, float(np.abs(b).max())))
sys.exit(0 if np.isfinite(a).all() and diff <= tol else 1)
PY

cat >"$tmp/compare_losses.py" <<'PY'
import sys
import numpy as np
a, b = np.loadtxt(sys.argv[1], ndmin=1), np.loadtxt(sys.argv[2], ndmin=1)
if a.shape != b.shape or b.size < 2:
    print("cnnbench's losses %s, torch's %s" % (a, b)); sys.exit(1)
tol = 1e-4 * float(np.abs(b).max())
moved = float(np.abs(b[1:] - b[0]).max())
print("losses %s, torch's %s (tolerance %.3g)" % (" ".join("%.6f" % v for v in a),
                                                 " ".join("%.6f" % v for v in b), tol))
if not moved > 20 * tol:
    print("torch's loss moved by %.3g only: the steps prove nothing" % moved); sys.exit(1)
sys.exit(0 if np.isfinite(a).all() and float(np.abs(a - b).max()) <= tol else 1)
PY

while read -r m ckpt; do
  facts="$tmp/torch_$m.facts"
  [[ -f "$facts" ]] || {
    fail "$m: torchvision could not load cnnbench's checkpoint (above)"
    continue
  }
  read -r _ torch_params torch_gflops <"$facts"
  params=$(sed -n 's/^Trainable parameters: //p' "$tmp/$m.info")
  gflops=$(sed -n 's/^Forward GFLOPs per image: //p' "$tmp/$m.info")
  [[ "$params" == "$torch_params" ]] ||
    fail "$m: $params trainable parameters, torchvision's has $torch_params"
  awk -v a="$gflops" -v b="$torch_gflops" 'BEGIN { d = a / b - 1; exit !(d <= 0.03 && d >= -0.03) }' ||
    fail "$m: $gflops forward GFLOPs per image, torchvision's $torch_gflops (more than 3% apart)"
  echo "$m: $params params, $gflops GFLOPs (torchvision $torch_gflops)"
  # direction, weights, torch's logits for them, the least max |logit| to accept
  for way in "torchvision -> cnnbench|$tmp/torch_weights_$m.safetensors|torch_own_$m|0.01" \
    "cnnbench -> torchvision|$ckpt|torch_$m|0"; do
    IFS='|' read -r what weights theirs least <<<"$way"
    if ! CNNB_PLUGIN_PATH="$zoo" "$CHECKPOINT_LOGITS" --model="$m" --checkpoint="$weights" \
      --images="$tmp/images.f32" --batch=$BATCH --image_size=$SIZE --num_classes=1001 \
      --out="$tmp/ours_$m.f32" >"$tmp/$m.logits" 2>&1; then
      fail "$m ($what): checkpoint_logits: $(tail -n 3 "$tmp/$m.logits")"
    elif result=$("$py" "$tmp/compare.py" "$tmp/ours_$m.f32" "$tmp/$theirs.f32" "$least"); then
      echo "  $what: $result"
    else
      fail "$m ($what): the same weights give other logits: $result"
    fi
  done
  if ! CNNB_PLUGIN_PATH="$zoo" "$CHECKPOINT_LOGITS" --model="$m" \
    --checkpoint="$tmp/torch_weights_$m.safetensors" --images="$tmp/images.f32" \
    --labels="$tmp/labels.i32" --train_steps=$TRAIN_STEPS --learning_rate="$(cat "$tmp/torch_lr_$m.txt")" \
    --batch=$BATCH --image_size=$SIZE --num_classes=1001 --out="$tmp/ours_train_$m.txt" \
    >"$tmp/$m.steps" 2>&1; then
    fail "$m (training): checkpoint_logits --train_steps: $(tail -n 3 "$tmp/$m.steps")"
  elif result=$("$py" "$tmp/compare_losses.py" "$tmp/ours_train_$m.txt" \
    "$tmp/torch_train_$m.txt"); then
    echo "  $TRAIN_STEPS training steps at lr $(cat "$tmp/torch_lr_$m.txt"): $result"
  else
    fail "$m (training): the same steps give other losses: $result"
  fi
done <"$tmp/models.list"
# ---- 4. the recipe's learning-rate schedule --------------------------------------------------
cat >"$tmp/schedule.py" <<'PY'
"""The schedule each zoo model's recipe gives, from its source: torchvision's train.py
builds torch's own schedulers (stepped once an epoch); the ported recipes step per update."""
import math, sys

GLOBAL_BATCH, EPOCH = 256, 1281167  # ImageNet's training set
# name: (rate, for a batch of, how it moves)
RECIPES = {
    "resnext50_32x4d": (0.1, 256, ("step", 30, 0.1)),
    "wide_resnet50_2": (0.1, 256, ("step", 30, 0.1)),
    "densenet121": (0.1, 256, ("step", 30, 0.1)),
    "squeezenet1_1": (0.01, 256, ("step", 30, 0.1)),
    "mobilenet_v3_large": (0.064, 1024, ("step", 2, 0.973)),
    "mobilenet_v3_small": (0.064, 1024, ("step", 2, 0.973)),
    "regnet_y_400mf": (0.8, 1024, ("cosine", 100, 5, 0.1)),
    "convnext_tiny": (1e-3, 1024, ("cosine", 600, 5, 0.01)),
    "efficientnet_b0": (0.256, 4096, ("tf_exponential", 2.4, 0.97, 5)),
    "shufflenet_v2_x1_0": (0.5, 1024, ("linear_iterations", 300000)),
}

def per_epoch(rate, how):
    """torchvision's train.py: the main scheduler, after a LinearLR warm-up when the
    recipe has one (SequentialLR), stepped at each epoch's end."""
    import torch
    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([param], lr=rate)
    if how[0] == "step":
        sched, epochs = torch.optim.lr_scheduler.StepLR(opt, how[1], how[2]), 600
    else:
        _, epochs, warmup, start = how
        main = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs - warmup)
        ramp = torch.optim.lr_scheduler.LinearLR(opt, start_factor=start, total_iters=warmup)
        sched = torch.optim.lr_scheduler.SequentialLR(opt, [ramp, main], milestones=[warmup])
    rates = []
    for _ in range(epochs + 1):
        rates.append(opt.param_groups[0]["lr"])
        opt.step()  # an epoch's updates, then the scheduler, as train.py
        sched.step()
    return rates

cache = {}

def expected(name, step):
    base, batch, how = RECIPES[name]
    rate = base * GLOBAL_BATCH / batch
    epoch = step * GLOBAL_BATCH / EPOCH
    if how[0] == "tf_exponential":  # TF's efficientnet: warm-up by step, then staircase
        _, every, factor, warmup = how
        if epoch < warmup:
            return rate * epoch / warmup
        return rate * factor ** math.floor(epoch / every)
    if how[0] == "linear_iterations":  # ShuffleNet: to 0 over N iterations of 1024
        return max(0.0, rate * (1 - step * GLOBAL_BATCH / (how[1] * 1024)))
    if name not in cache:
        cache[name] = per_epoch(rate, how)
    rates = cache[name]
    # None past the recipe's length: torch's cosine would rise again, the recipe has ended.
    return rates[int(epoch)] if int(epoch) < len(rates) else None

if sys.argv[1] == "steps":
    steps = set()
    for e in range(0, 601):
        first = math.ceil(e * EPOCH / GLOBAL_BATCH)
        steps.update((first, first + 1, max(first - 1, 0)))
    print("\n".join(str(s) for s in sorted(steps)))
    sys.exit(0)
# compare WORK NAME...: each model's WORK/NAME.lr ("step rate" lines) against its recipe.
work, failed = sys.argv[2], False
for name in sys.argv[3:]:
    rows, last, bad = 0, 0, None
    for line in open("%s/%s.lr" % (work, name)):
        step, got = int(line.split()[0]), float(line.split()[1])
        want = expected(name, step)
        if want is None:
            continue
        rows, last = rows + 1, step
        if abs(got - want) > 1e-6 * abs(want) + 1e-12:
            bad = "step %d (epoch %.4f): %.9g, the recipe's %.9g" % (
                step, step * GLOBAL_BATCH / EPOCH, got, want)
            break
    if bad or rows == 0:
        print("FAIL: %s: the learning-rate schedule is not the recipe's: %s" % (name, bad or "no steps"))
        failed = True
    else:
        print("%s: schedule: %d steps over %.0f epochs equal the recipe's" %
              (name, rows, last * GLOBAL_BATCH / EPOCH))
sys.exit(1 if failed else 0)
PY
"$py" "$tmp/schedule.py" steps >"$tmp/steps.txt"
scheduled=()
for m in $models; do
  if CNNB_PLUGIN_PATH="$zoo" "$MODEL_LR_SCHEDULE" --model="$m" --global_batch=256 \
    --examples_per_epoch=1281167 <"$tmp/steps.txt" >"$tmp/$m.lr" 2>"$tmp/$m.lr_err"; then
    scheduled+=("$m")
  else
    fail "$m: model_lr_schedule: $(tail -n 3 "$tmp/$m.lr_err")"
  fi
done
if [[ ${#scheduled[@]} -gt 0 ]]; then
  "$py" "$tmp/schedule.py" compare "$tmp" "${scheduled[@]}" 2>&1 | grep -v "UserWarning\|warnings.warn"
  [[ ${PIPESTATUS[0]} -eq 0 ]] || fail "learning-rate schedules (above)"
fi

[[ $failures -eq 0 ]] || exit 1
echo "OK: every zoo model equals torchvision's (parameters, FLOPs, logits, training steps, recipe)"
