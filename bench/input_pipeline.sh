#!/usr/bin/env bash
# input_pipeline.sh — issue 10's input benchmark: images/sec per core of cnnbench's imagenet
# datasource (cnnbench --input_only) beside Pillow + torchvision and TensorFlow's tf.data
# doing tf_cnn_benchmarks' preprocessing, on the same real photographs.
#
# In one run: builds the corpus (photo_corpus.sh) when it is missing, converts it to
# TFRecord shards with cnnbench-mkrecords, then runs every configuration below pinned to
# one core (taskset -c $CORE), REPS times interleaved (each repetition runs all of them
# in turn), so load from other work on this shared 2-core machine spreads over all of
# them. Each run reports wall images/sec and images per CPU-second of its own process in
# the timed window: the second is the per-core figure other work on the machine does not
# skew (bench/cpu_window.py reads cnnbench's, between its first and last timed step lines;
# input_anchors.py its own, over its timed batches). Prints one table
# (median and min-max of the repetitions) and the ratios the targets are about:
# cnnbench >= 2x Pillow+torchvision per core, and >= TensorFlow per core.
#
#   cnnbench, JPEG folder and TFRecords, --distortions=false (torchvision's recipe has no
#     colour jitter; torchvision's mean/std) and --distortions=true (tf_cnn_benchmarks'
#     default), --datasets_num_private_threads=1, batch 64, --input_dtype=float32 (float
#     batches normalized in the pipeline, as the anchors'); and the folder with the
#     default --input_dtype=auto (uint8 batches, normalized by the device)
#   torchvision: bench/input_anchors.py torchvision (the issue's recipe, one worker)
#   tf.data: bench/input_anchors.py tf, JPEG files and TFRecords, distortions off and on
#
# Usage: bench/input_pipeline.sh [--corpus=DIR] [--originals=0|1] [--reps=3]
#          [--batches=10] [--warmup=5] [--core=1] [--out=DIR]
# Env: BUILD (cnnbench build dir, default REPO/build), PYTHON (default /work/anchors/bin/python:
# tensorflow-cpu, torch, torchvision, pillow, scikit-learn, scikit-image).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$REPO/build}
PYTHON=${PYTHON:-/work/anchors/bin/python}
ORIGINALS=1
CORPUS=""
REPS=3
BATCHES=15   # 960 images = 3 epochs of the 320-image corpus
WARMUP=5     # 1 epoch: caches, decoders, TF's graph tracing
CORE=1
OUT=""
for arg in "$@"; do
  case "$arg" in
    --corpus=*) CORPUS=${arg#*=} ;;
    --originals=*) ORIGINALS=${arg#*=} ;;
    --reps=*) REPS=${arg#*=} ;;
    --batches=*) BATCHES=${arg#*=} ;;
    --warmup=*) WARMUP=${arg#*=} ;;
    --core=*) CORE=${arg#*=} ;;
    --out=*) OUT=${arg#*=} ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "input_pipeline.sh: unknown argument $arg (see --help)" >&2; exit 2 ;;
  esac
done
name=$([ "$ORIGINALS" = 1 ] && echo photos-mixed || echo photos-imagenet-like)
CORPUS=${CORPUS:-$BUILD/bench-data/$name}
OUT=${OUT:-$BUILD/bench-results/input-$name-$(date -u +%Y%m%dT%H%M%S)}
CNNBENCH=$BUILD/bin/cnnbench
MKRECORDS=$BUILD/bin/cnnbench-mkrecords
for x in "$CNNBENCH" "$MKRECORDS"; do
  [ -x "$x" ] || { echo "input_pipeline.sh: no $x: build first (cmake --build $BUILD -j2)" >&2; exit 2; }
done
# (Two processes: tensorflow and torch in one abort on their LLVMs' clashing options.)
{ "$PYTHON" -c 'import torch, torchvision, PIL' && "$PYTHON" -c 'import tensorflow'; } > /dev/null 2>&1 ||
  { echo "input_pipeline.sh: $PYTHON lacks tensorflow/torch/torchvision/Pillow" >&2; exit 2; }
mkdir -p "$OUT"

if [ ! -f "$CORPUS/MANIFEST" ]; then
  ORIGINALS=$ORIGINALS PYTHON=$PYTHON "$REPO/bench/photo_corpus.sh" "$CORPUS" | tee "$OUT/corpus.txt"
fi
RECORDS=$CORPUS-records
rm -rf "$RECORDS"
"$MKRECORDS" --input_dir="$CORPUS/train" --output_dir="$RECORDS" --num_shards=8 | tee "$OUT/mkrecords.txt"

PIN=(taskset -c "$CORE")
common=(--input_only --data_name=imagenet --batch_size=64 --num_batches="$BATCHES"
        --num_warmup_batches="$WARMUP" --datasets_num_private_threads=1 --device=cpu
        --model=resnet50 --display_every=1)
tv_norm=(--input_mean=0.485,0.456,0.406 --input_std=0.229,0.224,0.225)
anchor=("$PYTHON" "$REPO/bench/input_anchors.py" --batch_size=64 --batches="$BATCHES"
        --warmup_batches="$WARMUP")
# name|command (words separated by spaces; no word has one)
# cnnbench's rows use --input_dtype=float32: the pipeline normalizes into float32 batches,
# as both anchors do. Its default (auto) hands uint8 NHWC pixels to the device, which
# normalizes them; the two "uint8" rows show what that saves the pipeline.
f32=--input_dtype=float32
configs=(
  "cnnbench folder dist=0|${common[*]} --data_dir=$CORPUS --distortions=false ${tv_norm[*]} $f32"
  "cnnbench records dist=0|${common[*]} --data_dir=$RECORDS --distortions=false ${tv_norm[*]} $f32"
  "cnnbench folder dist=1|${common[*]} --data_dir=$CORPUS --distortions=true $f32"
  "cnnbench records dist=1|${common[*]} --data_dir=$RECORDS --distortions=true $f32"
  "cnnbench folder dist=0 uint8|${common[*]} --data_dir=$CORPUS --distortions=false --input_dtype=auto"
  "cnnbench folder dist=1 uint8|${common[*]} --data_dir=$CORPUS --distortions=true --input_dtype=auto"
  "torchvision folder|torchvision --folder=$CORPUS/train"
  "tf.data folder dist=0|tf --folder=$CORPUS/train --distortions=0"
  "tf.data records dist=0|tf --records=$RECORDS/train-* --distortions=0"
  "tf.data folder dist=1|tf --folder=$CORPUS/train --distortions=1"
  "tf.data records dist=1|tf --records=$RECORDS/train-* --distortions=1"
)

{
  echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC'); load average at start $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "- CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores; each run pinned to core $CORE"
  echo "- cnnbench commit $(git -C "$REPO" rev-parse --short HEAD)$(git -C "$REPO" diff --quiet HEAD 2>/dev/null || echo ' (uncommitted changes)'), build $BUILD ($(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$BUILD/CMakeCache.txt"))"
  echo "- libjpeg-turbo (Debian) $(dpkg-query -W -f '${Version}' libturbojpeg0 2>/dev/null); tensorflow-cpu $("$PYTHON" -c 'import tensorflow as t; print(t.__version__)' 2>/dev/null), $("$PYTHON" -c 'import torch, torchvision as v, PIL; print("torch", torch.__version__, "/ torchvision", v.__version__, "/ Pillow", PIL.__version__)' 2>/dev/null)"
  echo "- Corpus: $CORPUS ($(grep -vc '^#' "$CORPUS/MANIFEST") files), records $RECORDS (8 shards)"
  echo "- Per run: batch 64, $WARMUP warm-up + $BATCHES timed batches; $REPS repetitions interleaved"
} > "$OUT/header.md"
cat "$OUT/header.md"

: > "$OUT/results.csv"
for rep in $(seq 1 "$REPS"); do
  for i in "${!configs[@]}"; do
    label=${configs[$i]%%|*}
    args=${configs[$i]#*|}
    log="$OUT/run-$i-rep$rep.log"
    # shellcheck disable=SC2086
    case "$label" in
      cnnbench*)
        # The window: from the first timed step's line to the last's (BATCHES - 1 steps).
        "${PIN[@]}" "$PYTHON" "$REPO/bench/cpu_window.py" --start=$'^1\timages/sec' \
          --end=$'^'"$BATCHES"$'\timages/sec' -- \
          "${PIN[@]}" "$CNNBENCH" $args > "$log" 2>&1 || { echo "FAILED: $label (see $log)"; tail -5 "$log"; exit 1; }
        read -r wall percpu < <(sed -n 's/^cpu_window: wall_s=\([0-9.]*\) cpu_s=\([0-9.]*\)/\1 \2/p' "$log" |
          awk -v n=$(((BATCHES - 1) * 64)) '{ printf "%.2f %.2f\n", n / $1, n / $2 }')
        [ -n "$percpu" ] || { echo "FAILED: $label: no cpu_window line (see $log)"; exit 1; } ;;
      *)
        "${PIN[@]}" "${anchor[@]}" $args > "$log" 2>&1 || { echo "FAILED: $label (see $log)"; tail -5 "$log"; exit 1; }
        wall=$(sed -n 's/^images\/sec: //p' "$log")
        percpu=$(sed -n 's/^images\/cpu-sec: //p' "$log") ;;
    esac
    printf '%s,%d,%s,%s\n' "$label" "$rep" "$wall" "$percpu" >> "$OUT/results.csv"
    printf 'rep %d  %-26s %8s images/sec  %8s images/CPU-s  (load %s)\n' "$rep" "$label" "$wall" "$percpu" "$(cut -d' ' -f1 /proc/loadavg)"
  done
done

# The table: median and range per configuration, then the ratios.
"$PYTHON" - "$OUT/results.csv" > "$OUT/table.md" <<'EOF'
import csv, statistics, sys
rows = list(csv.reader(open(sys.argv[1])))
order, wall, cpu = [], {}, {}
for label, rep, w, c in rows:
    if label not in wall:
        order.append(label); wall[label] = []; cpu[label] = []
    wall[label].append(float(w)); cpu[label].append(float(c))
med = lambda v: statistics.median(v)
print("| pipeline (one core) | images/sec, wall: median (min-max) | images per CPU-second: median (min-max) |")
print("|---|---:|---:|")
for k in order:
    print("| %s | %.1f (%.1f-%.1f) | **%.1f** (%.1f-%.1f) |" % (
        k, med(wall[k]), min(wall[k]), max(wall[k]), med(cpu[k]), min(cpu[k]), max(cpu[k])))
print()
print("| ratio | per CPU-second | wall | target |")
print("|---|---:|---:|---|")
def ratio(a, b, target):
    if a in cpu and b in cpu:
        print("| %s / %s | %.2f | %.2f | %s |" % (a, b, med(cpu[a]) / med(cpu[b]),
                                               med(wall[a]) / med(wall[b]), target))
ratio("cnnbench folder dist=0", "torchvision folder", ">= 2")
ratio("cnnbench records dist=0", "torchvision folder", ">= 2")
for fmt in ("folder", "records"):
    for d in ("0", "1"):
        ratio("cnnbench %s dist=%s" % (fmt, d), "tf.data %s dist=%s" % (fmt, d), ">= 1")
EOF
echo
cat "$OUT/table.md"
echo
echo "logs, results.csv, table.md: $OUT"
