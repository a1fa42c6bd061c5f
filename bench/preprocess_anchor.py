"""preprocess_anchor.py — the anchors for bench/preprocess_bench.c: the same directory of
JPEGs, held in memory, preprocessed one image at a time on one thread by
  pillow:  what torchvision's RandomResizedCrop + RandomHorizontalFlip + ToTensor +
           Normalize do for training (PIL decode, convert RGB, crop+resize bilinear with
           Pillow's resize(box=...), flip, to float CHW normalized) and Resize(256) +
           CenterCrop(224) for eval -- done with Pillow and numpy directly, so torchvision
           is not needed;
  tf:      tf_cnn_benchmarks' train path (sample_distorted_bounding_box, decode_and_crop_jpeg,
           random flip, resize bilinear, normalize) and eval path (decode INTEGER_FAST,
           aspect-preserving resize, central crop), in a tf.function, 1 intra/inter thread.
Prints images/sec for each, by the wall clock and per CPU-second. Usage: python preprocess_anchor.py DIR [--size 224] [--reps 3]
"""
import argparse
import io
import os
import random
import time

import numpy as np


def load(d):
    out = []
    for root, _, names in os.walk(d):
        for n in sorted(names):
            if n.lower().endswith((".jpg", ".jpeg")):
                with open(os.path.join(root, n), "rb") as f:
                    out.append(f.read())
    return out


def best_rate(fn, files, reps):
    """images/s by the wall clock and per second of process CPU time (all threads)."""
    best, best_cpu = 1e30, 1e30
    for _ in range(reps):
        t0, c0 = time.perf_counter(), time.process_time()
        for i, b in enumerate(files):
            fn(b, i)
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    return len(files) / best, len(files) / best_cpu


def pillow_fns(size):
    from PIL import Image
    mean = np.array([0.5, 0.5, 0.5], np.float32).reshape(3, 1, 1)
    std = np.array([0.5, 0.5, 0.5], np.float32).reshape(3, 1, 1)
    rng = random.Random(0)

    def to_tensor(img):
        a = np.asarray(img, dtype=np.float32).transpose(2, 0, 1) / 255.0
        return (a - mean) / std

    def train(b, i):
        img = Image.open(io.BytesIO(b)).convert("RGB")
        w, h = img.size
        area = w * h
        for _ in range(10):  # torchvision RandomResizedCrop.get_params
            ta = area * rng.uniform(0.08, 1.0)
            ar = np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3)))
            cw, ch = int(round((ta * ar) ** 0.5)), int(round((ta / ar) ** 0.5))
            if 0 < cw <= w and 0 < ch <= h:
                x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
                break
        else:
            x, y, cw, ch = 0, 0, w, h
        img = img.resize((size, size), Image.BILINEAR, box=(x, y, x + cw, y + ch))
        if rng.random() < 0.5:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
        return to_tensor(img)

    def evaluate(b, i):
        img = Image.open(io.BytesIO(b)).convert("RGB")
        w, h = img.size
        s = int(size / 0.875)
        if w < h:
            nw, nh = s, int(s * h / w)
        else:
            nw, nh = int(s * w / h), s
        img = img.resize((nw, nh), Image.BILINEAR)
        l, t = (nw - size) // 2, (nh - size) // 2
        return to_tensor(img.crop((l, t, l + size, t + size)))

    def decode(b, i):
        return Image.open(io.BytesIO(b)).convert("RGB").load()

    return decode, train, evaluate


def tf_fns(size):
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)

    @tf.function
    def decode(b):
        return tf.io.decode_jpeg(b, channels=3)

    @tf.function
    def train(b):
        bbox = tf.zeros([1, 0, 4], tf.float32)
        begin, sz, _ = tf.image.sample_distorted_bounding_box(
            tf.image.extract_jpeg_shape(b), bounding_boxes=bbox, min_object_covered=0.1,
            aspect_ratio_range=[0.75, 1.33], area_range=[0.05, 1.0], max_attempts=100,
            use_image_if_no_bounding_boxes=True)
        oy, ox, _ = tf.unstack(begin)
        th, tw, _ = tf.unstack(sz)
        img = tf.image.decode_and_crop_jpeg(b, tf.stack([oy, ox, th, tw]), channels=3)
        img = tf.image.random_flip_left_right(img)
        img = tf.image.resize(img, [size, size], "bilinear")
        return img * (1.0 / 127.5) - 1.0

    @tf.function
    def evaluate(b):
        img = tf.io.decode_jpeg(b, channels=3, dct_method="INTEGER_FAST")
        s = tf.shape(img)
        hf, wf = tf.cast(s[0], tf.float32), tf.cast(s[1], tf.float32)
        r = tf.maximum(size / hf, size / wf)
        rh, rw = tf.cast(hf * r * 1.145, tf.int32), tf.cast(wf * r * 1.145, tf.int32)
        img = tf.image.resize(img, [rh, rw], "bilinear")
        img = tf.slice(img, [(rh - size) // 2, (rw - size) // 2, 0], [size, size, 3])
        return img * (1.0 / 127.5) - 1.0

    # The bytes become string tensors first: a Python bytes argument would make each file a
    # traced constant, and TF would fold the whole preprocessing into it.
    cache = {}

    def t(b):
        k = id(b)
        if k not in cache:
            cache[k] = tf.constant(b)
        return cache[k]

    return (lambda b, i: decode(t(b)).numpy(), lambda b, i: train(t(b)).numpy(),
            lambda b, i: evaluate(t(b)).numpy())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--only", choices=["pillow", "tf"])
    a = p.parse_args()
    files = load(a.dir)
    print(f"{len(files)} JPEGs, target {a.size}x{a.size}, 1 thread")
    for name, make in (("pillow", pillow_fns), ("tf", tf_fns)):
        if a.only and a.only != name:
            continue
        decode, train, evaluate = make(a.size)
        for mode, fn in (("decode", decode), ("train", train), ("eval", evaluate)):
            for i, b in enumerate(files):  # warm-up (tf.function tracing, tensors made)
                fn(b, i)
            wall, cpu = best_rate(fn, files, a.reps)
            print(f"{name:7s} {mode:7s} {wall:8.1f} images/s wall {cpu:8.1f} images/cpu-s",
                  flush=True)


if __name__ == "__main__":
    main()
