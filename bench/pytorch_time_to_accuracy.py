#!/usr/bin/env python3
"""pytorch_time_to_accuracy.py — the PyTorch side of bench/time_to_accuracy.sh.

tf_cnn_benchmarks' LeNet (conv 32 5x5 SAME + ReLU, max pool 2, conv 64 5x5 SAME + ReLU,
max pool 2, dense 512 + ReLU, dense 10) trained on Fashion-MNIST's IDX files with the race's
recipe: SGD with Nesterov momentum (as tf_cnn_benchmarks' momentum optimizer), a constant
learning rate after an optional linear warm-up over whole epochs, L2 weight decay on every
parameter (tf_cnn_benchmarks' total_loss, which skips only batch norm: LeNet has none), the
training images shuffled every epoch, no augmentation, pixels scaled to [-1, 1] (cnnbench's
mnist datasource's normalization), and the 10,000 test images evaluated after every epoch.

The clock starts at the first training step and includes the evaluations, as cnnbench's
--target_accuracy report counts it (data loading and model creation are before it, as
cnnbench's setup is). Prints one line a script reads:

  time_to_accuracy: reached=1 seconds=S epochs=E top1=T images_per_sec=R

(reached=0 with the best top-1 when --max_epochs ran out), and one `epoch N: top-1 T` line
per evaluation. Threads: torch.set_num_threads(--threads), as cnnbench's
--num_intra_threads.
"""
import argparse
import gzip
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def find(data_dir, name):
    for candidate in (name, name + ".gz"):
        path = os.path.join(data_dir, candidate)
        if os.path.exists(path):
            return path
    sys.exit(f"pytorch_time_to_accuracy: no {name}[.gz] in {data_dir}")


def load(data_dir, split):
    images = read_idx(find(data_dir, f"{split}-images-idx3-ubyte"))
    labels = read_idx(find(data_dir, f"{split}-labels-idx1-ubyte"))
    x = torch.from_numpy(images.astype(np.float32)).div_(127.5).sub_(1.0).unsqueeze(1)
    y = torch.from_numpy(labels.astype(np.int64))
    return x, y


class LeNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 5, padding=2)
        self.conv2 = nn.Conv2d(32, 64, 5, padding=2)
        self.fc1 = nn.Linear(64 * 7 * 7, 512)
        self.fc2 = nn.Linear(512, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


def evaluate(model, x, y, batch):
    model.eval()
    hits = 0
    with torch.no_grad():
        for i in range(0, len(x), batch):
            hits += (model(x[i:i + batch]).argmax(1) == y[i:i + batch]).sum().item()
    model.train()
    return hits / len(x)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data_dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--batch_size", type=int, default=64)
    p.add_argument("--learning_rate", type=float, default=0.02)
    p.add_argument("--warmup_epochs", type=float, default=0.0)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight_decay", type=float, default=4e-5)
    p.add_argument("--target", type=float, default=0.90)
    p.add_argument("--max_epochs", type=int, default=10)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    train_x, train_y = load(a.data_dir, "train")
    test_x, test_y = load(a.data_dir, "t10k")
    model = LeNet()
    opt = torch.optim.SGD(model.parameters(), lr=a.learning_rate, momentum=a.momentum,
                          nesterov=True, weight_decay=a.weight_decay)
    steps_per_epoch = (len(train_x) + a.batch_size - 1) // a.batch_size
    warmup_steps = a.warmup_epochs * steps_per_epoch
    g = torch.Generator().manual_seed(a.seed)
    step, images, best = 0, 0, 0.0
    start = time.perf_counter()
    train_seconds = 0.0
    for epoch in range(1, a.max_epochs + 1):
        order = torch.randperm(len(train_x), generator=g)
        t0 = time.perf_counter()
        for i in range(0, len(train_x), a.batch_size):
            idx = order[i:i + a.batch_size]
            if warmup_steps > 0 and step < warmup_steps:
                for group in opt.param_groups:
                    group["lr"] = a.learning_rate * (step + 1) / warmup_steps
            elif warmup_steps > 0:
                for group in opt.param_groups:
                    group["lr"] = a.learning_rate
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(train_x[idx]), train_y[idx])
            loss.backward()
            opt.step()
            step += 1
            images += len(idx)
        train_seconds += time.perf_counter() - t0
        top1 = evaluate(model, test_x, test_y, 500)
        best = max(best, top1)
        print(f"epoch {epoch}: top-1 {top1:.4f}", flush=True)
        if top1 >= a.target:
            seconds = time.perf_counter() - start
            print(f"time_to_accuracy: reached=1 seconds={seconds:.3f} epochs={epoch} "
                  f"top1={top1:.4f} images_per_sec={images / train_seconds:.1f}")
            return
    seconds = time.perf_counter() - start
    print(f"time_to_accuracy: reached=0 seconds={seconds:.3f} epochs={a.max_epochs} "
          f"top1={best:.4f} images_per_sec={images / train_seconds:.1f}")


if __name__ == "__main__":
    main()
