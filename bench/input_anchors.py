#!/usr/bin/env python3
"""input_anchors.py: the two anchors issue 10's input benchmark compares cnnbench with.

  torchvision  Pillow + torchvision, exactly the issue's recipe: datasets.ImageFolder,
               RandomResizedCrop(224) + RandomHorizontalFlip + ToTensor + Normalize,
               DataLoader(num_workers=0, shuffle=True), torch.set_num_threads(1).
  tf           TensorFlow's tf.data doing tf_cnn_benchmarks' own training preprocessing
               (scripts/tf_cnn_benchmarks/preprocessing.py, RecordInputImagePreprocessor
               with its defaults: fuse_decode_and_crop, bilinear resize, and
               --nodistort_color_in_yiq, which TF2 requires when --distortions is on):
               sample_distorted_bounding_box on extract_jpeg_shape, decode_and_crop_jpeg,
               random_flip_left_right, resize_images (v1 bilinear, align_corners=False),
               optional colour distortions, scaling to [-1, 1]. Reads either TFRecord
               shards (--records=GLOB, parsed as parse_example_proto does) or the JPEG
               files of an ImageFolder tree (--folder=DIR, bbox-less: the whole image).
               One thread: tf.data private_threadpool_size=1, max_intra_op_parallelism=1,
               tf.config intra/inter op 1.

Both time --batches batches of --batch_size after --warmup_batches and print
`images/sec: X` (wall clock) and `images/cpu-sec: Y` (the process's CPU time in the same
window). Pin the process to one core from outside (taskset -c 1): the point is
images/sec per core. Nothing here is tuned beyond what the recipes say.
"""
import argparse
import glob
import os
import sys
import time


def time_batches(it, batch_size, warmup, batches, label):
    for _ in range(warmup):
        next(it)
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(batches):
        next(it)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    n = batches * batch_size
    # CPU seconds of the whole process (all its threads) in the timed window: on a shared
    # machine images per CPU-second is the per-core figure that other work does not skew.
    print("%s: %d images in %.3f s, %.3f CPU-s" % (label, n, dt, cpu))
    print("images/sec: %.2f" % (n / dt))
    print("images/cpu-sec: %.2f" % (n / cpu))


def run_torchvision(a):
    import torch
    from torchvision import datasets, transforms
    torch.set_num_threads(1)
    tf = transforms.Compose([
        transforms.RandomResizedCrop(224),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    ])
    ds = datasets.ImageFolder(a.folder, tf)
    loader = torch.utils.data.DataLoader(ds, batch_size=a.batch_size, shuffle=True,
                                         num_workers=0)

    def forever():
        while True:
            for images, labels in loader:
                yield images, labels
    import PIL
    import torchvision
    print("torch %s, torchvision %s, Pillow %s; %d images in %d classes" %
          (torch.__version__, torchvision.__version__, PIL.__version__, len(ds),
           len(ds.classes)))
    time_batches(forever(), a.batch_size, a.warmup_batches, a.batches, "torchvision")


def run_tf(a):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    height = width = 224
    batch_size = a.batch_size

    # preprocessing.py's parse_example_proto.
    def parse_example_proto(example_serialized):
        feature_map = {
            "image/encoded": tf.io.FixedLenFeature([], tf.string, default_value=""),
            "image/class/label": tf.io.FixedLenFeature([1], tf.int64, default_value=-1),
            "image/class/text": tf.io.FixedLenFeature([], tf.string, default_value=""),
        }
        for k in ["image/object/bbox/xmin", "image/object/bbox/ymin",
                  "image/object/bbox/xmax", "image/object/bbox/ymax"]:
            feature_map[k] = tf.io.VarLenFeature(tf.float32)
        features = tf.io.parse_single_example(example_serialized, feature_map)
        label = tf.cast(features["image/class/label"], tf.int32)
        xmin = tf.expand_dims(features["image/object/bbox/xmin"].values, 0)
        ymin = tf.expand_dims(features["image/object/bbox/ymin"].values, 0)
        xmax = tf.expand_dims(features["image/object/bbox/xmax"].values, 0)
        ymax = tf.expand_dims(features["image/object/bbox/ymax"].values, 0)
        bbox = tf.concat([ymin, xmin, ymax, xmax], 0)
        bbox = tf.expand_dims(bbox, 0)
        bbox = tf.transpose(bbox, [0, 2, 1])
        return features["image/encoded"], label, bbox

    # preprocessing.py's distort_color with distort_color_in_yiq=False.
    def distort_color(image, batch_position):
        def fn0():
            im = tf.image.random_brightness(image, max_delta=32. / 255.)
            im = tf.image.random_saturation(im, lower=0.5, upper=1.5)
            im = tf.image.random_hue(im, max_delta=0.2)
            return tf.image.random_contrast(im, lower=0.5, upper=1.5)

        def fn1():
            im = tf.image.random_brightness(image, max_delta=32. / 255.)
            im = tf.image.random_contrast(im, lower=0.5, upper=1.5)
            im = tf.image.random_saturation(im, lower=0.5, upper=1.5)
            return tf.image.random_hue(im, max_delta=0.2)
        image = tf.cond(tf.equal(batch_position % 2, 0), fn0, fn1)
        return tf.clip_by_value(image, 0.0, 1.0)

    # preprocessing.py's train_image (fuse_decode_and_crop=True), then normalized_image.
    def train_image(image_buffer, bbox, batch_position):
        begin, size, _ = tf.image.sample_distorted_bounding_box(
            tf.image.extract_jpeg_shape(image_buffer), bounding_boxes=bbox,
            min_object_covered=0.1, aspect_ratio_range=[0.75, 1.33],
            area_range=[0.05, 1.0], max_attempts=100,
            use_image_if_no_bounding_boxes=True)
        offset_y, offset_x, _ = tf.unstack(begin)
        target_height, target_width, _ = tf.unstack(size)
        crop_window = tf.stack([offset_y, offset_x, target_height, target_width])
        image = tf.image.decode_and_crop_jpeg(image_buffer, crop_window, channels=3)
        image = tf.image.random_flip_left_right(image)
        image = tf.compat.v1.image.resize_images(
            image, [height, width], tf.image.ResizeMethod.BILINEAR, align_corners=False)
        image.set_shape([height, width, 3])
        if a.distortions:
            image = tf.cast(image, tf.float32) / 255.
            image = distort_color(image, batch_position)
            image *= 255
        image = tf.multiply(image, 1. / 127.5)
        return tf.cast(tf.subtract(image, 1.0), tf.float32)

    counter = tf.data.Dataset.range(batch_size).repeat()
    if a.records:
        files = sorted(glob.glob(a.records))
        if not files:
            sys.exit("input_anchors.py: no files match --records=%s" % a.records)
        # create_dataset: list_files, parallel_interleave(TFRecordDataset, cycle 10),
        # zip with the batch position, prefetch, shuffle_and_repeat(10000), map+batch.
        ds = tf.data.Dataset.list_files(files, shuffle=True)
        ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=10)
        ds = tf.data.Dataset.zip((ds, counter)).prefetch(batch_size)
        ds = ds.shuffle(10000).repeat()

        def parse_and_preprocess(value, batch_position):
            image_buffer, label, bbox = parse_example_proto(value)
            return train_image(image_buffer, bbox, batch_position), label
        what = "%d TFRecord files" % len(files)
    else:
        classes = sorted(d for d in os.listdir(a.folder)
                         if os.path.isdir(os.path.join(a.folder, d)))
        paths, labels = [], []
        for i, c in enumerate(classes):
            for f in sorted(os.listdir(os.path.join(a.folder, c))):
                if f.lower().endswith((".jpg", ".jpeg")):
                    paths.append(os.path.join(a.folder, c, f))
                    labels.append(i)
        if not paths:
            sys.exit("input_anchors.py: no JPEG files under --folder=%s" % a.folder)
        ds = tf.data.Dataset.from_tensor_slices((paths, labels))
        ds = tf.data.Dataset.zip((ds, counter)).prefetch(batch_size)
        ds = ds.shuffle(10000).repeat()

        def parse_and_preprocess(path_label, batch_position):
            path, label = path_label
            no_bbox = tf.zeros([1, 0, 4], tf.float32)
            return train_image(tf.io.read_file(path), no_bbox, batch_position), label
        what = "%d JPEG files" % len(paths)
    ds = ds.map(parse_and_preprocess, num_parallel_calls=1)
    ds = ds.batch(batch_size, drop_remainder=True).prefetch(1)
    options = tf.data.Options()
    options.threading.private_threadpool_size = 1
    options.threading.max_intra_op_parallelism = 1
    ds = ds.with_options(options)
    print("tensorflow %s; %s; distortions %s" % (tf.__version__, what, a.distortions))
    time_batches(iter(ds), batch_size, a.warmup_batches, a.batches,
                 "tf.data" + (" records" if a.records else " folder"))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("which", choices=["torchvision", "tf"])
    p.add_argument("--folder", help="ImageFolder root (DIR/train)")
    p.add_argument("--records", help="TFRecord shards, a glob (tf only)")
    p.add_argument("--distortions", type=int, default=0, help="tf: colour distortions 0/1")
    p.add_argument("--batch_size", type=int, default=64)
    p.add_argument("--warmup_batches", type=int, default=5)
    p.add_argument("--batches", type=int, default=10)
    a = p.parse_args()
    if a.which == "torchvision":
        if not a.folder:
            p.error("torchvision needs --folder")
        run_torchvision(a)
    else:
        if bool(a.folder) == bool(a.records):
            p.error("tf needs one of --folder, --records")
        run_tf(a)


if __name__ == "__main__":
    main()
