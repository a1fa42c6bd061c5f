#!/usr/bin/env bash
# zoo_vs_pytorch.sh — issue 34's speed table: training images/sec of every model of
# contrib/torchvision_zoo beside PyTorch's torchvision model of the same name, on this
# CPU, one after the other in one run: fp32, batch 32, 224x224 synthetic images, SGD with
# momentum; PyTorch at its best for this (channels_last, data in memory, threads set:
# bench/pytorch_train.py --channels_last).
#
# Usage: bench/zoo_vs_pytorch.sh [--build=DIR] [--python=PY] [--batch=32] [--warmup=1]
#                                [--steps=3] [--threads=2] [--models="..."] [--out=DIR]
# The zoo is built against a fresh install of --build (default build), as a third party
# builds it. Results: results.csv and summary.md in --out (default
# $BUILD/bench-results/zoo-<time>). About 8 minutes for the ten models on 2 cores.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$REPO/build PY=${CNNB_PYTHON:-/var/cache/cnnbench-ci/python/bin/python}
BATCH=32 WARMUP=1 STEPS=3 THREADS=2 MODELS="" OUT=""
for a in "$@"; do
  case "$a" in
    --build=*) BUILD=${a#*=} ;;
    --python=*) PY=${a#*=} ;;
    --batch=*) BATCH=${a#*=} ;;
    --warmup=*) WARMUP=${a#*=} ;;
    --steps=*) STEPS=${a#*=} ;;
    --threads=*) THREADS=${a#*=} ;;
    --models=*) MODELS=${a#*=} ;;
    --out=*) OUT=${a#*=} ;;
    -h | --help)
      sed -n '2,12p' "$0"
      exit 0
      ;;
    *)
      echo "zoo_vs_pytorch.sh: unknown argument '$a' (see --help)" >&2
      exit 2
      ;;
  esac
done
BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || {
  echo "zoo_vs_pytorch.sh: no build directory '$BUILD'" >&2
  exit 2
}
"$PY" -c 'import torch, torchvision' 2>/dev/null || {
  echo "zoo_vs_pytorch.sh: $PY cannot import torch and torchvision (--python=PY)" >&2
  exit 2
}
OUT=${OUT:-$BUILD/bench-results/zoo-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

CNNB_BUILD_DIR=$BUILD CNNB_SOURCE_DIR=$REPO
# shellcheck source=../tests/support/zoo_build.sh
. "$REPO/tests/support/zoo_build.sh"
zoo_build "$work" >"$OUT/zoo_build.log" 2>&1 || {
  cat "$OUT/zoo_build.log"
  exit 1
}
MODELS=${MODELS:-$zoo_models}
export OMP_NUM_THREADS=$THREADS

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
torch_version=$("$PY" -c 'import torch; print(torch.__version__)')
echo "model,cnnbench_img_s,pytorch_img_s,ratio" >"$OUT/results.csv"
{
  echo "# The zoo beside PyTorch"
  echo
  echo "$cpu, $THREADS threads; fp32, batch $BATCH, 224x224 synthetic, momentum SGD;"
  echo "$WARMUP warm-up and $STEPS timed steps each; PyTorch $torch_version channels_last."
  echo
  echo "| model | cnnbench img/s | PyTorch img/s | ratio |"
  echo "|---|---:|---:|---:|"
} >"$OUT/summary.md"

for m in $MODELS; do
  ours=$(zoo_cnnbench --model="$m" --device=cpu --batch_size="$BATCH" --image_size=224 \
    --num_warmup_batches="$WARMUP" --num_batches="$STEPS" --optimizer=momentum \
    --num_intra_threads="$THREADS" 2>&1 | tee "$OUT/$m.cnnbench.log" |
    sed -n 's/^total images\/sec: //p')
  theirs=$("$PY" "$REPO/bench/pytorch_train.py" --model="$m" --batch_size="$BATCH" \
    --num_warmup_batches="$WARMUP" --num_batches="$STEPS" --threads="$THREADS" \
    --channels_last 2>&1 | tee "$OUT/$m.pytorch.log" | sed -n 's/^total images\/sec: //p')
  ratio=$(awk -v a="${ours:-0}" -v b="${theirs:-0}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')
  echo "$m,${ours:-failed},${theirs:-failed},$ratio" >>"$OUT/results.csv"
  echo "| $m | ${ours:-failed} | ${theirs:-failed} | $ratio |" >>"$OUT/summary.md"
  echo "$m: cnnbench ${ours:-failed}, PyTorch ${theirs:-failed} img/s ($ratio)"
done
echo
cat "$OUT/summary.md"
