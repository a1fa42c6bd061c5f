#!/usr/bin/env python3
"""pytorch_gpu_train.py — the PyTorch side of cnnbench's GPU check (bench/gpu_check.sh).

Trains (or, with --inference, runs forward only) a torchvision model on synthetic data the
way PyTorch is usually made fast on a GPU, which is the recipe issue 9's targets were
measured with: channels_last memory format, torch.autocast("cuda", fp16 or bf16) with
fp32 master weights (and a GradScaler for fp16), fp32 with TF32 allowed,
torch.backends.cudnn.benchmark, SGD with Nesterov momentum 0.9 (cnnbench's momentum, as
tf_cnn_benchmarks'). The images and labels are made on the GPU once, as cnnbench's
synthetic data is, so no step uploads anything. After the warm-up steps (which include
cudnn.benchmark's algorithm search), the timed steps run back to back between two
torch.cuda.synchronize() calls. Prints lines a script can read:

    total images/sec: X
    peak GPU memory MiB: Y        (torch.cuda.max_memory_allocated, whole run)
    peak GPU reserved MiB: Z      (what PyTorch's caching allocator held)

--compile wraps the model in torch.compile(mode="reduce-overhead") (CUDA graphs), the
strongest PyTorch the issue names; compilation happens in the warm-up steps.
--device=cpu runs the same code on the CPU (fp32 or bf16, tiny sizes): a smoke test for
machines without a GPU, not a benchmark.
"""
import argparse
import sys
import time

import torch
import torchvision

# cnnbench model name -> (torchvision constructor, image size, extra kwargs). 1001
# classes as tf_cnn_benchmarks (label 0 unused), so the classifier costs the same.
# inception_v3: no auxiliary head (tf_cnn_benchmarks' inception3 has none); init_weights=
# False skips the slow scipy truncated-normal init, which does not change step time.
# torchvision's resnets are v1.5 (stride on the 3x3 conv); its alexnet is the 224x224
# "one weird trick" variant (cnnbench's is tf_cnn_benchmarks' 227x227 one).
MODELS = {
    "alexnet": ("alexnet", 224, {}),
    "vgg11": ("vgg11", 224, {}),
    "vgg16": ("vgg16", 224, {}),
    "vgg19": ("vgg19", 224, {}),
    "resnet18": ("resnet18", 224, {}),
    "resnet50": ("resnet50", 224, {}),
    "resnet50_v1.5": ("resnet50", 224, {}),
    "resnet101": ("resnet101", 224, {}),
    "resnet152": ("resnet152", 224, {}),
    "inception3": ("inception_v3", 299, {"aux_logits": False, "init_weights": False}),
    "googlenet": ("googlenet", 224, {"aux_logits": False, "init_weights": False}),
    "mobilenet": ("mobilenet_v2", 224, {}),
}
DTYPES = {"fp32": None, "fp16": torch.float16, "bf16": torch.bfloat16}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="resnet50", help="one of: " + ", ".join(MODELS))
    p.add_argument("--batch_size", type=int, default=256)
    p.add_argument("--num_warmup_batches", type=int, default=10)
    p.add_argument("--num_batches", type=int, default=30)
    p.add_argument("--precision", choices=list(DTYPES), default="fp16")
    p.add_argument("--inference", action="store_true",
                   help="forward only (eval mode, torch.inference_mode)")
    p.add_argument("--compile", action="store_true",
                   help='torch.compile(model, mode="reduce-overhead")')
    p.add_argument("--no_tf32", action="store_true", help="fp32 without TF32")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--image_size", type=int, default=0, help="0: the model's own")
    p.add_argument("--num_classes", type=int, default=1001)
    p.add_argument("--learning_rate", type=float, default=0.005)
    p.add_argument("--weight_decay", type=float, default=4e-5)
    args = p.parse_args()

    if args.model not in MODELS:
        sys.exit(f"pytorch_gpu_train.py: unknown model '{args.model}' "
                 f"(known: {', '.join(MODELS)})")
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("pytorch_gpu_train.py: error: torch.cuda.is_available() is False "
                 "(no GPU or no CUDA build of PyTorch); --device=cpu runs the smoke test")
    if args.device == "cpu" and args.precision == "fp16":
        sys.exit("pytorch_gpu_train.py: --device=cpu runs fp32 or bf16 only")
    ctor_name, size, kwargs = MODELS[args.model]
    size = args.image_size or size
    dev = torch.device(args.device)
    cuda = dev.type == "cuda"
    dtype = DTYPES[args.precision]
    torch.manual_seed(1)

    if cuda:
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.matmul.allow_tf32 = not args.no_tf32
        torch.backends.cudnn.allow_tf32 = not args.no_tf32

    model = getattr(torchvision.models, ctor_name)(num_classes=args.num_classes, **kwargs)
    model = model.to(dev, memory_format=torch.channels_last)
    # Synthetic data, made on the device once: [N, 3, H, W] in channels_last, fp32 (autocast
    # casts it at the first convolution, as it would a real batch).
    images = torch.randn(args.batch_size, 3, size, size, device=dev)
    images = images.contiguous(memory_format=torch.channels_last)
    labels = torch.randint(1, args.num_classes, (args.batch_size,), device=dev)
    loss_fn = torch.nn.CrossEntropyLoss()
    autocast = torch.autocast(dev.type, dtype=dtype or torch.float32, enabled=dtype is not None)

    def mark_step():
        # CUDA-graph trees (reduce-overhead) want each iteration's start marked, so the
        # outputs of one replay may be overwritten by the next.
        if args.compile:
            torch.compiler.cudagraph_mark_step_begin()

    if args.inference:
        model.eval()
        run = torch.compile(model, mode="reduce-overhead") if args.compile else model

        def step():
            mark_step()
            with torch.inference_mode(), autocast:
                return run(images)
    else:
        model.train()
        opt = torch.optim.SGD(model.parameters(), lr=args.learning_rate, momentum=0.9,
                              nesterov=True, weight_decay=args.weight_decay)
        # fp16 needs loss scaling (cnnbench scales its loss too); bf16 and fp32 do not.
        scaler = torch.amp.GradScaler(dev.type, enabled=args.precision == "fp16")
        run = torch.compile(model, mode="reduce-overhead") if args.compile else model

        def step():
            mark_step()
            opt.zero_grad(set_to_none=True)
            with autocast:
                loss = loss_fn(run(images), labels)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            return loss.detach()

    def sync():
        if cuda:
            torch.cuda.synchronize()

    print(f"pytorch {torch.__version__} torchvision {torchvision.__version__} "
          f"cudnn {torch.backends.cudnn.version() if cuda else '-'} "
          f"device {torch.cuda.get_device_name() if cuda else 'cpu'} "
          f"model={args.model} ({ctor_name}, {size}x{size}) batch={args.batch_size} "
          f"{args.precision}{' (TF32 off)' if args.no_tf32 else ''} "
          f"{'inference' if args.inference else 'training'}"
          f"{' compiled (reduce-overhead)' if args.compile else ''} "
          f"warmup={args.num_warmup_batches} steps={args.num_batches}", flush=True)

    t_start = time.perf_counter()
    for _ in range(args.num_warmup_batches):
        out = step()
    sync()
    print(f"warm-up: {args.num_warmup_batches} steps in {time.perf_counter() - t_start:.1f} s",
          flush=True)

    # Timed: back to back, one synchronize at each end (no per-step host sync, so the
    # host's launch queue runs ahead as it would in training).
    t0 = time.perf_counter()
    for _ in range(args.num_batches):
        out = step()
    sync()
    elapsed = time.perf_counter() - t0
    last = float(out.float().mean() if args.inference else out)
    if last != last:  # NaN
        sys.exit("pytorch_gpu_train.py: error: the last step's output is NaN")
    total = args.batch_size * args.num_batches / elapsed if elapsed > 0 else 0.0
    print(f"timed: {args.num_batches} steps in {elapsed:.3f} s "
          f"({1000 * elapsed / max(args.num_batches, 1):.2f} ms/step), "
          f"last {'mean logit' if args.inference else 'loss'} {last:.4f}")
    print(f"total images/sec: {total:.2f}")
    if cuda:
        print(f"peak GPU memory MiB: {torch.cuda.max_memory_allocated() / 2**20:.0f}")
        print(f"peak GPU reserved MiB: {torch.cuda.max_memory_reserved() / 2**20:.0f}")


if __name__ == "__main__":
    main()
