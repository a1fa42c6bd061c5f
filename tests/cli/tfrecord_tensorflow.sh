#!/usr/bin/env bash
# cnnbench's record layer against TensorFlow's own, both ways:
#  - shards written by tf.io.TFRecordWriter with tf.train.Example (build_imagenet_data.py's
#    features, boxes of 0..3, unknown features, a record without a label) read through
#    cnnbench's parser (tfrecord_dump) give the labels, image bytes and boxes TensorFlow
#    put in;
#  - cnnbench-mkrecords' shards read by tf.data.TFRecordDataset + tf.io.parse_single_example
#    with tf_cnn_benchmarks' feature map give what cnnbench reads, and the stored
#    height/width/channels/synset agree with tf.io.decode_jpeg and the class folder.
# Needs TensorFlow in $CNNB_PYTHON (default /work/anchors/bin/python when it exists, else
# python3): skips (77) without it.
set -uo pipefail
: "${TFRECORD_DUMP:?}"
py=${CNNB_PYTHON:-}
if [ -z "$py" ]; then
  if [ -x /work/anchors/bin/python ]; then py=/work/anchors/bin/python; else py=python3; fi
fi
if ! "$py" -c 'import tensorflow' >/dev/null 2>&1; then
  echo "SKIP: TensorFlow is not importable by $py (set CNNB_PYTHON to a Python with tensorflow)"
  exit 77
fi
export TF_CPP_MIN_LOG_LEVEL=3 TF_ENABLE_ONEDNN_OPTS=0
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# Python computes the same line tfrecord_dump prints:
#   label size fnv1a64(image) boxes [ymin xmin ymax xmax]...
cat > "$work/common.py" <<'PY'
def fnv(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    return h
def line(label, image, boxes):
    s = "%d %d %016x %d" % (label, len(image), fnv(image), len(boxes))
    for (ymin, xmin, ymax, xmax) in boxes:
        s += " %.6g %.6g %.6g %.6g" % (ymin, xmin, ymax, xmax)
    return s
PY

# One Python run does both directions (importing TensorFlow is most of this test's time):
#   tf.py COMMON_DIR TF_OUT WANT1 [CLASSES WANT2 MKRECORDS_SHARDS...]
# 1. TensorFlow writes shards to TF_OUT and the lines cnnbench must read to WANT1;
# 2. TensorFlow reads mkrecords' shards and writes what it read to WANT2.
cat > "$work/tf.py" <<'PY'
import random, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import tensorflow as tf
from common import line

def write(out_dir, want):
    rnd = random.Random(5)
    def b(v): return tf.train.Feature(bytes_list=tf.train.BytesList(value=v))
    def f(v): return tf.train.Feature(float_list=tf.train.FloatList(value=v))
    def i(v): return tf.train.Feature(int64_list=tf.train.Int64List(value=v))
    out = open(want, "w")
    for shard in range(2):
        with tf.io.TFRecordWriter("%s/train-%05d-of-00002" % (out_dir, shard)) as w:
            for n in range(25):
                image = bytes(rnd.getrandbits(8) for _ in range(rnd.choice([0, 1, 200, 3000, 20000])))
                label = rnd.randint(1, 1000)
                boxes = []
                for _ in range(rnd.randint(0, 3)):
                    y0, x0 = rnd.random() / 2, rnd.random() / 2
                    boxes.append((y0, x0, y0 + rnd.random() / 2, x0 + rnd.random() / 2))
                boxes = [tuple(float(np.float32(v)) for v in bx) for bx in boxes]
                feature = {
                    'image/height': i([rnd.randint(1, 4000)]), 'image/width': i([rnd.randint(1, 4000)]),
                    'image/colorspace': b([b'RGB']), 'image/channels': i([3]),
                    'image/class/synset': b([b'n01440764']), 'image/class/text': b([b'tench, Tinca tinca']),
                    'image/object/bbox/xmin': f([bx[1] for bx in boxes]),
                    'image/object/bbox/xmax': f([bx[3] for bx in boxes]),
                    'image/object/bbox/ymin': f([bx[0] for bx in boxes]),
                    'image/object/bbox/ymax': f([bx[2] for bx in boxes]),
                    'image/object/bbox/label': i([label] * len(boxes)),
                    'image/format': b([b'JPEG']), 'image/filename': b([b'n01440764_%d.JPEG' % n]),
                    'image/encoded': b([image]),
                    'some/unknown/feature': f([1.5, 2.5]),
                }
                if n == 7:   # no label: cnnbench says so (-1 here, tf_cnn_benchmarks' default)
                    shown = -1
                else:
                    feature['image/class/label'] = i([label])
                    shown = label
                ex = tf.train.Example(features=tf.train.Features(feature=feature))
                w.write(ex.SerializeToString())
                print(line(shown, image, boxes), file=out)

def read(classes, want, shards):
    # tf_cnn_benchmarks' parse_example_proto feature map, and the fields mkrecords adds.
    fmap = {
        'image/encoded': tf.io.FixedLenFeature([], dtype=tf.string, default_value=''),
        'image/class/label': tf.io.FixedLenFeature([1], dtype=tf.int64, default_value=-1),
        'image/class/text': tf.io.FixedLenFeature([], dtype=tf.string, default_value=''),
        'image/class/synset': tf.io.FixedLenFeature([], dtype=tf.string, default_value=''),
        'image/filename': tf.io.FixedLenFeature([], dtype=tf.string, default_value=''),
        'image/format': tf.io.FixedLenFeature([], dtype=tf.string, default_value=''),
        'image/colorspace': tf.io.FixedLenFeature([], dtype=tf.string, default_value=''),
        'image/height': tf.io.FixedLenFeature([], dtype=tf.int64),
        'image/width': tf.io.FixedLenFeature([], dtype=tf.int64),
        'image/channels': tf.io.FixedLenFeature([], dtype=tf.int64),
    }
    for k in ['xmin', 'ymin', 'xmax', 'ymax']:
        fmap['image/object/bbox/' + k] = tf.io.VarLenFeature(dtype=tf.float32)
    fmap['image/object/bbox/label'] = tf.io.VarLenFeature(dtype=tf.int64)
    classes = classes.split(',')
    bad = 0
    out = open(want, "w")
    for rec in tf.data.TFRecordDataset(shards):
        ex = tf.io.parse_single_example(rec, fmap)
        image = ex['image/encoded'].numpy()
        label = int(ex['image/class/label'].numpy()[0])
        boxes = list(zip(*[tf.sparse.to_dense(ex['image/object/bbox/' + k]).numpy().tolist()
                           for k in ['ymin', 'xmin', 'ymax', 'xmax']]))
        decoded = tf.io.decode_jpeg(image)
        h, w, c = decoded.shape
        stored = (int(ex['image/height']), int(ex['image/width']), int(ex['image/channels']))
        synset = ex['image/class/synset'].numpy().decode()
        if (h, w, c) != stored or synset != classes[label - 1] or \
                ex['image/format'].numpy() != b'JPEG' or not ex['image/filename'].numpy().startswith(b'img'):
            print("MISMATCH: decoded", (h, w, c), "stored", stored, synset, label,
                  ex['image/filename'].numpy(), file=sys.stderr)
            bad += 1
        print(line(label, image, boxes), file=out)
    return bad

write(sys.argv[2], sys.argv[3])
bad = read(sys.argv[4], sys.argv[5], sys.argv[6:]) if len(sys.argv) > 4 else 0
sys.exit(3 if bad else 0)
PY

mkdir -p "$work/tf"
reverse=()
if [ -z "${MKRECORDS:-}" ] || [ -z "${MAKE_JPEG:-}" ]; then
  echo "note: cnnbench-mkrecords not built (component JPEG off): only TensorFlow -> cnnbench is checked"
else
  in=$work/in
  mkdir -p "$in/n01" "$in/n02" "$in/n03"
  k=0
  for c in n01 n02 n03; do
    for s in "64 48" "31 77" "200 150"; do
      k=$((k + 1)); mode=; [ $((k % 4)) -eq 0 ] && mode=gray; [ $((k % 3)) -eq 0 ] && mode=progressive
      "$MAKE_JPEG" "$in/$c/img$k.jpg" $s $k $mode || exit 1
    done
  done
  "$MKRECORDS" --input_dir="$in" --output_dir="$work/mk" --num_shards=2 --seed=3 >/dev/null ||
    fail "mkrecords failed"
  reverse=(n01,n02,n03 "$work/want2" "$work"/mk/train-*)
fi
"$py" "$work/tf.py" "$work" "$work/tf" "$work/want1" "${reverse[@]}"
rc=$?
[ "$rc" -eq 3 ] && fail "TensorFlow's view of mkrecords' shards disagrees with their stored fields (above)"
[ "$rc" -eq 0 ] || [ "$rc" -eq 3 ] || { echo "the TensorFlow script failed ($rc)"; exit 1; }

"$TFRECORD_DUMP" "$work"/tf/train-* > "$work/got1" || fail "cnnbench could not read TensorFlow's shards"
if ! diff "$work/want1" "$work/got1" > "$work/diff1"; then
  fail "cnnbench reads TensorFlow's records differently:"; head -20 "$work/diff1"
fi
[ "$(wc -l < "$work/got1")" -eq 50 ] || fail "expected 50 records, read $(wc -l < "$work/got1")"
grep -q '^-1 ' "$work/got1" || fail "the record without a label was not read as unlabelled"
grep -qE '^[0-9]+ [0-9]+ [0-9a-f]+ 3 ' "$work/got1" || fail "no record with 3 boxes was read"

if [ "${#reverse[@]}" -gt 0 ]; then
  "$TFRECORD_DUMP" "$work"/mk/train-* > "$work/got2" || fail "cnnbench could not read mkrecords' shards"
  if ! diff "$work/want2" "$work/got2" > "$work/diff2"; then
    fail "TensorFlow reads mkrecords' records differently from cnnbench:"; head -20 "$work/diff2"
  fi
  [ "$(wc -l < "$work/got2")" -eq 9 ] || fail "expected 9 records from mkrecords, read $(wc -l < "$work/got2")"
fi

if [ "$failures" -ne 0 ]; then echo "$failures failure(s)"; exit 1; fi
echo "tfrecord_tensorflow: TensorFlow's records read identically; mkrecords' records read identically by TensorFlow"
