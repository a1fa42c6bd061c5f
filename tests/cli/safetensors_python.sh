#!/usr/bin/env bash
# cnnbench's safetensors files against PyTorch's safetensors package, both ways:
#  - a file cnnbench writes (safetensors_tool write: F32 scalar and 4-D, I64, F16, BF16,
#    an empty tensor, metadata) opens with safetensors.torch.load_file and safe_open (the
#    reference reader, which checks the header rules itself) with the same names, dtypes,
#    shapes, bytes and metadata cnnbench reads, and the values PyTorch sees are the ones
#    written;
#  - a file safetensors.torch.save_file writes (its own tensor order and header padding)
#    reads in cnnbench (safetensors_tool dump) as PyTorch wrote it.
# Needs torch and safetensors in $CNNB_PYTHON (default /work/anchors/bin/python when it
# exists, else python3): skips (77) without them.
set -uo pipefail
: "${SAFETENSORS_TOOL:?}"
py=${CNNB_PYTHON:-}
if [ -z "$py" ]; then
  if [ -x /work/anchors/bin/python ]; then py=/work/anchors/bin/python; else py=python3; fi
fi
if ! "$py" -c 'import torch, safetensors.torch' >/dev/null 2>&1; then
  echo "SKIP: torch and safetensors are not both importable by $py (set CNNB_PYTHON to a Python with them: pip install torch safetensors)"
  exit 77
fi
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# st.py read PATH OUT | write PATH OUT: OUT gets the lines safetensors_tool dump prints
# (for the metadata keys format, step, absent):
#   meta KEY VALUE|<none>
#   NAME DTYPE [D0,D1,...] FNV1A64(raw little-endian bytes)    sorted by name
cat > "$work/st.py" <<'PY'
import sys
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

DTYPES = {torch.float32: "F32", torch.int64: "I64", torch.float16: "F16", torch.bfloat16: "BF16"}
KEYS = ["format", "step", "absent"]

def fnv(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    return h

def dump(tensors, meta, out):
    with open(out, "w") as f:
        for k in KEYS:
            print("meta %s %s" % (k, meta.get(k, "<none>")), file=f)
        for name in sorted(tensors):
            t = tensors[name]
            raw = t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
            print("%s %s [%s] %016x" % (name, DTYPES[t.dtype], ",".join(str(d) for d in t.shape),
                                        fnv(raw)), file=f)

mode, path, out = sys.argv[1:4]
if mode == "read":
    tensors = load_file(path)
    with safe_open(path, framework="pt") as f:
        meta = f.metadata() or {}
    dump(tensors, meta, out)
    # The values themselves, as safetensors_tool writes them.
    want = {
        "scalar": torch.tensor(3.5),
        "conv/weights": (torch.arange(120, dtype=torch.float32) * 0.25 - 3.0).reshape(2, 3, 4, 5),
        "counts": torch.tensor([-1, 0, 2**63 - 1], dtype=torch.int64),
        "half": torch.tensor([1.0, -2.0, 65504.0, 2.0**-24], dtype=torch.float16),
        "bf16": torch.tensor([[1.0, -1.0], [3.140625, 0.0]], dtype=torch.bfloat16),
        "empty": torch.zeros(0, 3),
    }
    bad = [n for n in want if n not in tensors or tensors[n].dtype != want[n].dtype
           or tensors[n].shape != want[n].shape or not torch.equal(tensors[n], want[n])]
    if bad or set(tensors) != set(want):
        print("MISMATCH in", bad or sorted(set(tensors) ^ set(want)), file=sys.stderr)
        sys.exit(3)
else:
    g = torch.Generator().manual_seed(11)
    tensors = {
        "fc.weight": torch.randn(10, 7, generator=g),
        "fc.bias": torch.randn(10, generator=g),
        "conv1.weight": torch.randn(4, 3, 3, 3, generator=g),
        "bn1.num_batches_tracked": torch.tensor(1234567, dtype=torch.int64),
        "bn1.running_mean": torch.randn(3, generator=g).half(),
        "odd": torch.randn(3, generator=g).to(torch.bfloat16),   # 6 bytes: misaligns what follows
        "big_step": torch.tensor([2**40 + 3, -5], dtype=torch.int64),
        "nothing": torch.zeros(2, 0),
    }
    meta = {"format": "pt", "step": "7"}
    save_file(tensors, path, metadata=meta)
    dump(tensors, meta, out)
PY

"$SAFETENSORS_TOOL" write "$work/cnnb.safetensors" || { echo "safetensors_tool write failed"; exit 1; }
"$py" "$work/st.py" read "$work/cnnb.safetensors" "$work/torch_read" 2> "$work/err"
rc=$?
[ "$rc" -eq 3 ] && fail "PyTorch reads other values than cnnbench wrote: $(cat "$work/err")"
[ "$rc" -eq 0 ] || [ "$rc" -eq 3 ] || fail "PyTorch's safetensors refused cnnbench's file: $(tail -3 "$work/err")"
"$SAFETENSORS_TOOL" dump "$work/cnnb.safetensors" format step absent > "$work/cnnb_read" ||
  fail "cnnbench cannot read its own file"
if [ "$rc" -eq 0 ] && ! diff "$work/torch_read" "$work/cnnb_read"; then
  fail "PyTorch and cnnbench read cnnbench's file differently (above)"
fi
[ "$(grep -c ' F32 \| I64 \| F16 \| BF16 ' "$work/cnnb_read")" -eq 6 ] ||
  fail "expected 6 tensors in cnnbench's file: $(cat "$work/cnnb_read")"

"$py" "$work/st.py" write "$work/torch.safetensors" "$work/torch_wrote" 2> "$work/err" ||
  { echo "the PyTorch script failed: $(tail -3 "$work/err")"; exit 1; }
if ! "$SAFETENSORS_TOOL" dump "$work/torch.safetensors" format step absent > "$work/cnnb_read2" 2> "$work/err"; then
  fail "cnnbench refused PyTorch's file: $(cat "$work/err")"
elif ! diff "$work/torch_wrote" "$work/cnnb_read2"; then
  fail "cnnbench reads PyTorch's file differently from what PyTorch wrote (above)"
fi
grep -q '^meta step 7$' "$work/cnnb_read2" || fail "PyTorch's metadata not read"

if [ "$failures" -ne 0 ]; then echo "$failures failure(s)"; exit 1; fi
echo "safetensors_python: cnnbench's file reads identically in PyTorch; PyTorch's reads identically in cnnbench"
