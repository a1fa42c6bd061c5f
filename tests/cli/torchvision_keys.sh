#!/usr/bin/env bash
# The models saved under torchvision's state_dict keys really have torchvision's keys and
# shapes: for each, checkpoint_keys' "key shape" list (cnnb_graph_param_key, batch 1,
# 1001 classes) against torchvision's <model>(num_classes=1001).state_dict():
#  - every torchvision key is saved with the same shape, and nothing else is saved, except
#    what the checkpoint writer adds for a named batch norm (num_batches_tracked, and the
#    ones "weight" of a batch norm without a learned scale);
#  - those additions (checkpoint_keys --extras) are torchvision keys with its shapes too,
#    so torchvision's strict load_state_dict takes the file as it is.
# Then every model of every plugin saves each key once (checkpoint_keys --all).
# Needs PyTorch and torchvision in $CNNB_PYTHON (default /work/anchors/bin/python when it
# exists, else python3) for the first part: skips (77) without them, after the second.
# Each side lists shapes only (torchvision's on the meta device): no weights, no download.
set -uo pipefail
: "${CHECKPOINT_KEYS:?}"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# Every model, unique keys (no Python needed).
if ! "$CHECKPOINT_KEYS" --all > "$work/all.txt" 2> "$work/all.err"; then
  cat "$work/all.txt" "$work/all.err"
  fail "checkpoint_keys --all: some model saves a key twice or does not build"
fi
grep -q '^resnet50 imagenet: 320 keys, 320 under checkpoint names, unique$' "$work/all.txt" ||
  fail "checkpoint_keys --all did not report resnet50 fully named: $(grep '^resnet50 ' "$work/all.txt")"

py=${CNNB_PYTHON:-}
if [ -z "$py" ]; then
  if [ -x /work/anchors/bin/python ]; then py=/work/anchors/bin/python; else py=python3; fi
fi
command -v "$py" >/dev/null 2>&1 || {
  [ "$failures" -eq 0 ] || exit 1
  echo "SKIP: no Python '$py' (set CNNB_PYTHON to a Python with torch and torchvision); unique keys checked"
  exit 77
}

# cnnbench model -> torchvision constructor and its arguments. tf_cnn_benchmarks'
# inception3 has no auxiliary head, so torchvision's is built without one.
models="resnet50:resnet50 resnet50_v1.5:resnet50 resnet101:resnet101 resnet152:resnet152
        vgg11:vgg11 vgg16:vgg16 vgg19:vgg19 inception3:inception_v3"
for pair in $models; do
  m=${pair%%:*}
  "$CHECKPOINT_KEYS" --model="$m" --num_classes=1001 > "$work/$m.keys" 2> "$work/$m.err" ||
    { cat "$work/$m.err"; fail "checkpoint_keys --model=$m"; }
  "$CHECKPOINT_KEYS" --model="$m" --num_classes=1001 --extras > "$work/$m.all" 2>> "$work/$m.err" ||
    { cat "$work/$m.err"; fail "checkpoint_keys --model=$m --extras"; }
done

cat > "$work/compare.py" <<'PY'
import sys
try:  # imported once, here: importing torch takes seconds
    import torch, torchvision.models as tvm
except ImportError as e:
    print("SKIP: %s cannot import torch and torchvision (%s); set CNNB_PYTHON to a Python "
          "with both. Unique keys checked." % (sys.executable, e))
    sys.exit(77)
work, pairs = sys.argv[1], sys.argv[2:]
def read(path):
    out = {}
    for line in open(path):
        parts = line.split()
        key, shape = parts[0], parts[1] if len(parts) > 1 else ""
        if key in out: print("FAIL: %s: key %s listed twice" % (path, key))
        out[key] = shape
    return out
bad = 0
for pair in pairs:
    ours, ctor = pair.split(":")
    kwargs = {"num_classes": 1001}
    if ctor == "inception_v3": kwargs.update(aux_logits=False, init_weights=False)
    with torch.device("meta"):  # shapes only: no memory, no initialisation time
        sd = getattr(tvm, ctor)(**kwargs).state_dict()
    theirs = {k: ",".join(str(d) for d in v.shape) for k, v in sd.items()}
    params = read("%s/%s.keys" % (work, ours))
    every = read("%s/%s.all" % (work, ours))
    extras = {k: v for k, v in every.items() if k not in params}
    problems = []
    for k, shape in theirs.items():
        if k in params:
            if params[k] != shape:
                problems.append("%s: torchvision %s, cnnbench %s" % (k, shape, params[k]))
        elif k in extras:
            if extras[k] != shape:
                problems.append("%s (writer's extra): torchvision %s, cnnbench %s" % (k, shape, extras[k]))
        else:
            problems.append("%s %s: torchvision's, not saved by cnnbench" % (k, shape))
    for k, shape in every.items():
        if k not in theirs:
            problems.append("%s %s: saved by cnnbench, not a torchvision key" % (k, shape))
    print("%s vs torchvision %s: %d keys, %d from the writer, %d problems"
          % (ours, ctor, len(params), len(extras), len(problems)))
    for p in problems[:20]: print("  FAIL:", p)
    bad += len(problems) > 0 or len(params) == 0
sys.exit(1 if bad else 0)
PY
# shellcheck disable=SC2086
"$py" "$work/compare.py" "$work" $models
rc=$?
if [ "$rc" -eq 77 ]; then
  [ "$failures" -eq 0 ] || exit 1
  exit 77
fi
[ "$rc" -eq 0 ] || fail "keys or shapes differ from torchvision's (above)"

[ "$failures" -eq 0 ] || exit 1
echo "OK: torchvision's keys and shapes for $(echo $models | wc -w) models; every model's keys unique"
