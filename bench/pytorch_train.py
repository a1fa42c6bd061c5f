#!/usr/bin/python3
"""pytorch_train.py — the PyTorch side of cnnbench's CPU benchmarks.

Trains a torchvision model on synthetic data the way tf_cnn_benchmarks (and so cnnbench)
does: fixed random images and labels, softmax cross-entropy, SGD with Nesterov momentum
0.9, a few warm-up steps, then timed steps. fp32, or bf16 the way PyTorch recommends on
CPU (channels_last memory format + torch.autocast("cpu", dtype=torch.bfloat16)). Prints
lines a script can read:

    total images/sec: X
    peak RSS MiB: Y

Run it with Debian's interpreter (/usr/bin/python3), which is where python3-torch lives.
"""
import argparse
import os
import resource
import sys
import time

# The thread count must be fixed before torch spins up its OpenMP pool.
def _early_threads():
    for a in sys.argv[1:]:
        if a.startswith("--threads="):
            return a.split("=", 1)[1]
    return "2"


os.environ.setdefault("OMP_NUM_THREADS", _early_threads())

import torch  # noqa: E402
import torchvision  # noqa: E402

# cnnbench model name -> (torchvision constructor name, image size, extra kwargs).
# tf_cnn_benchmarks uses 1001 classes (label 0 unused); we do the same so the classifier
# costs the same. Auxiliary heads are off: tf_cnn_benchmarks' inception3 has none in
# the benchmark, and googlenet never had one there. init_weights=False skips the slow
# scipy truncated-normal init, which does not change the step time.
MODELS = {
    "alexnet": ("alexnet", 224, {}),
    "vgg11": ("vgg11", 224, {}),
    "vgg16": ("vgg16", 224, {}),
    "vgg19": ("vgg19", 224, {}),
    "resnet50": ("resnet50", 224, {}),
    "resnet101": ("resnet101", 224, {}),
    "resnet152": ("resnet152", 224, {}),
    "inception3": ("inception_v3", 299, {"aux_logits": False, "init_weights": False}),
    "inception_v3": ("inception_v3", 299, {"aux_logits": False, "init_weights": False}),
    "googlenet": ("googlenet", 224, {"aux_logits": False, "init_weights": False}),
    "mobilenet": ("mobilenet_v2", 224, {}),
    "mobilenet_v2": ("mobilenet_v2", 224, {}),
}


class Clamp6(torch.nn.Module):
    """ReLU6 as clamp(x, 0, 6): the same function, but its backward exists in bf16.
    PyTorch 1.13's own ReLU6 (hardtanh) backward raises "hardshrink_backward_cpu not
    implemented for 'BFloat16'" on CPU, which stops mobilenet_v2 under bf16 autocast."""

    def forward(self, x):
        return torch.clamp(x, 0.0, 6.0)


def replace_relu6(module):
    n = 0
    for name, child in module.named_children():
        if isinstance(child, torch.nn.ReLU6):
            setattr(module, name, Clamp6())
            n += 1
        else:
            n += replace_relu6(child)
    return n


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="resnet50", help="one of: " + ", ".join(MODELS))
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--num_warmup_batches", type=int, default=2)
    p.add_argument("--num_batches", type=int, default=5)
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--num_classes", type=int, default=1001)
    p.add_argument("--learning_rate", type=float, default=0.005)
    p.add_argument("--weight_decay", type=float, default=4e-5)
    p.add_argument("--channels_last", action="store_true",
                   help="channels_last memory format in fp32 too (bf16 always uses it): "
                        "PyTorch's fastest CPU layout for convolutions")
    args = p.parse_args()

    if args.model in MODELS:
        ctor_name, size, kwargs = MODELS[args.model]
    elif hasattr(torchvision.models, args.model):  # the zoo's models keep torchvision's names
        ctor_name, size, kwargs = args.model, 224, {}
    else:
        sys.exit(f"pytorch_train.py: unknown model '{args.model}' (known: {', '.join(MODELS)} "
                 "and torchvision's own names)")
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)

    model = getattr(torchvision.models, ctor_name)(num_classes=args.num_classes, **kwargs)
    model.train()
    images = torch.randn(args.batch_size, 3, size, size)
    labels = torch.randint(1, args.num_classes, (args.batch_size,))
    bf16 = args.precision == "bf16"
    if bf16:
        replaced = replace_relu6(model)
        if replaced:
            print(f"note: {replaced} ReLU6 replaced by clamp(0, 6) (PyTorch 1.13 has no bf16 "
                  "ReLU6 backward on CPU)", flush=True)
    if bf16 or args.channels_last:
        model = model.to(memory_format=torch.channels_last)
        images = images.contiguous(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=args.learning_rate, momentum=0.9,
                          nesterov=True, weight_decay=args.weight_decay)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            out = model(images)
            loss = loss_fn(out, labels)
        loss.backward()
        opt.step()
        return float(loss)

    print(f"pytorch {torch.__version__} torchvision {torchvision.__version__} "
          f"model={args.model} ({ctor_name}) batch={args.batch_size} {args.precision} "
          f"threads={torch.get_num_threads()} warmup={args.num_warmup_batches} "
          f"channels_last={bf16 or args.channels_last} "
          f"steps={args.num_batches}", flush=True)
    for i in range(args.num_warmup_batches):
        t = time.perf_counter()
        loss = step()
        print(f"warmup {i + 1}\t{args.batch_size / (time.perf_counter() - t):.2f} img/s"
              f"\tloss {loss:.3f}", flush=True)
    times = []
    for i in range(args.num_batches):
        t = time.perf_counter()
        loss = step()
        times.append(time.perf_counter() - t)
        print(f"{i + 1}\t{args.batch_size / times[-1]:.2f} img/s\tloss {loss:.3f}", flush=True)
    total = args.batch_size * len(times) / sum(times) if times else 0.0
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux
    print(f"total images/sec: {total:.2f}")
    print(f"peak RSS MiB: {rss_mib:.0f}")


if __name__ == "__main__":
    main()
