#!/usr/bin/env python3
"""scaling_model.py — issue 8's scaling model: predicted weak-scaling efficiency of each
distribution strategy at 8, 64 and 512 devices, from each model's measured compute and an
alpha-beta cost of each strategy's communication, beside the published figures.

Inputs
  * Compute: bench/scaling_compute.csv (--compute), one row per model, measured on this
    machine by `scaling_model.py --measure` (cnnbench training runs):
      model        cnnbench's model name
      batch        per-step batch of the measurement
      threads      --num_intra_threads of the measurement
      step_s       seconds per training step (forward + backward + momentum update)
      params       trainable parameters (cnnbench --model_info)
      largest_params   parameters of the largest layer (its weights and bias: the
                       smallest piece a parameter server can hold)
      fwd_gflops   forward GFLOPs per image
      cpu_pct      the runs' share of the CPU (200 = both cores of this machine)
      measured     when (UTC) and at which commit
    Lines starting with '#' are comments.
  * Layers: `cnnbench --model=M --model_info` (--cnnbench, else found in build-bench/ or
    build/): each layer's parameters and forward FLOPs, in forward order. They give the
    order and the moment each layer's gradient is ready during backward (below). Without
    a cnnbench binary the gradients are taken to be ready uniformly over backward.
  * The reference GPU: per-step compute on a P100 is the published tf_cnn_benchmarks
    figure (TensorFlow's "Benchmarks" page, DGX-1, synthetic data, May 2017; see
    PUBLISHED): batch / images/sec. A model without a published figure (ResNet-101) is
    scaled from its measured time here by ResNet-50's ratio P100/here.

The model
  * Weak scaling: every device computes its own batch in t_compute = t_fwd + t_bwd, with
    t_bwd = 2/3 t_compute: backward does twice the forward's FLOPs (the gradients of the
    inputs and of the weights), and cnnb_profile's ResNet-50 step on this CPU agrees
    (bench/README: 2600 of 3855 ms, 67%). Efficiency = t_compute / t_step.
  * Overlap (the assumption): each layer's backward takes time in proportion to its
    forward FLOPs, so its gradient is ready when the backward has done the FLOPs of every
    layer after it. Gradients are sent in buckets, in backward order (horovod: fused up to
    64 MiB, its default --horovod_fusion_threshold); a bucket leaves when its last
    gradient is ready and the link is free (one bucket at a time), and communication runs
    beside the compute without slowing it (a GPU's copy engines and NIC; not true of a
    CPU, where the network stack and the sums take cores from the compute). The step
    ends when the backward and the last bucket are done: t_step = t_fwd + max(t_bwd,
    end of the last bucket); the parameter update is not counted.
  * Link cost: alpha + bytes / beta per message, beta = rate x efficiency (LINKS).
  * horovod (flat ring over all n devices): 2(n-1)/n x B / beta + 2(n-1) alpha per bucket
    of B bytes, over the slowest link in the ring (the NIC when n spans nodes: the ring
    enters and leaves each node once, so each NIC carries what one ring link does).
  * hierarchical (horovod's hierarchical allreduce): reduce-scatter inside each node of g
    devices over its fast link, a ring allreduce of every shard among the m = n/g nodes
    (each NIC carries the node's B), all-gather inside the node:
    2(g-1)/g x B / beta_node + 2(g-1) alpha_node + 2(m-1)/m x B / beta_net + 2(m-1) alpha_net.
  * parameter_server (tf's distributed_replicated, synchronous): gradients are summed
    inside the node first (the ring above, over the node's link), then every node pushes
    its sum to the PS shards and pulls the new values; a shard lives on every node
    (tf's greedy placement by size), so the busiest node's NIC carries, per phase,
    (m-1) x max(B/m, largest layer) bytes plus (m-1) alpha: with a layer larger than
    B/m the shards cannot balance (VGG16's fc6 is 74% of its bytes). Pushes leave layer by
    layer during backward. Across nodes the pull copies the new values back at the end of
    the step (tf's distributed_replicated; cnnbench's finish_update), not overlapped. In
    one node (m = 1) the variables live on the host CPU (tf's parameter_server with
    --local_parameter_device=cpu): every device pushes and pulls B through the host's
    PCIe uplinks, and the pull feeds the next forward layer by layer, as tf's ops read
    their variables when they run (each layer's forward waits for its own values;
    forward time per layer in proportion to its FLOPs).
  * replicated: inside one node it is the hierarchical reduce with m = 1 (NCCL's ring);
    across nodes it is horovod's ring (nccl across ranks), so it is not listed apart.

Usage
  scaling_model.py [--compute=bench/scaling_compute.csv] [--cnnbench=PATH] [--speedup=1]
      prints the tables (markdown); --speedup=F divides every reference compute time by F,
      for a device F times faster than a P100 (the faster the device, the larger the share
      of the step that communication takes)
  scaling_model.py --measure [--cnnbench=PATH] [--models=resnet50,inception3,vgg16,alexnet,resnet101]
                   [--batch=32] [--steps=5] [--warmup=1] [--threads=2] [--repeat=3] [--compute=CSV]
      measures the compute here and (re)writes the CSV: the fastest of --repeat training
      runs of each model
  scaling_model.py --validate FILE... [--step-s=S --model=resnet50 --batch=B]
      fits alpha and beta to `allreduce_bench mpi` outputs (bench/scaling.sh writes them,
      one per link) and compares the model's allreduce time with each measured size;
      with --step-s, predicts the 2-rank efficiency of a model on each of those links
"""
import csv
import datetime
import math
import os
import re
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
MiB = 1 << 20

# --- published figures ----------------------------------------------------------------
# TensorFlow "Benchmarks" (tensorflow/docs_src/performance/benchmarks.md, test date May
# 2017; tf_cnn_benchmarks, synthetic data, images/sec):
#  * DGX-1, 8 x P100 (NVLink), batch 64 per GPU (AlexNet 512); InceptionV3 and ResNet-50
#    with variable_update=parameter_server and local_parameter_device=cpu, VGG16 and
#    AlexNet replicated with NCCL. 1 GPU / 8 GPUs: InceptionV3 142 / 1131, ResNet-50
#    219 / 1734, VGG16 154 / 1081, AlexNet 2987 / 17822. The announcement (Google
#    Developers Blog, 2017-05-10) rounds the speedups to 7.99x and 7.91x.
#  * Amazon EC2 distributed, p2.8xlarge (8 x K80 each, 10 Gbit/s network),
#    distributed_replicated, batch 64: 1 GPU / 64 GPUs: InceptionV3 29.7 / 1783 (60.0x;
#    8 instances, 6 PS), ResNet-50 52.4 / 2744 (52.4x; the seed quotes 59x and 52x).
# Horovod's benchmark page (docs/benchmarks): 128 servers x 4 Pascal GPUs, RoCE 25 Gbit/s,
# batch 64: 90% efficiency at 512 GPUs for InceptionV3 and ResNet-101, 68% for VGG16.
P100_IPS = {"inception3": (64, 142.0), "resnet50": (64, 219.0), "vgg16": (64, 154.0),
            "alexnet": (512, 2987.0)}
K80_IPS = {"inception3": (64, 29.7), "resnet50": (64, 52.4)}
PUBLISHED = [
    # (what, model, devices, published speedup or efficiency, system key, strategy)
    ("8 P100, DGX-1 (tf_cnn_benchmarks)", "inception3", 8, "7.99x (1131/142 = 7.96x)", "dgx1-p100", "parameter_server"),
    ("8 P100, DGX-1 (tf_cnn_benchmarks)", "resnet50", 8, "7.91x (1734/219 = 7.92x)", "dgx1-p100", "parameter_server"),
    ("8 P100, DGX-1 (tf_cnn_benchmarks)", "vgg16", 8, "7.02x (1081/154)", "dgx1-p100", "hierarchical"),
    ("64 K80, 8 x p2.8xlarge, 10 GbE (tf_cnn_benchmarks)", "inception3", 64, "59x (1783/29.7 = 60.0x)", "p2-k80", "parameter_server"),
    ("64 K80, 8 x p2.8xlarge, 10 GbE (tf_cnn_benchmarks)", "resnet50", 64, "52x (2744/52.4 = 52.4x)", "p2-k80", "parameter_server"),
    ("512 Pascal, 128 x 4, 25 GbE RoCE (Horovod)", "inception3", 512, "90%", "horovod-512", "horovod"),
    ("512 Pascal, 128 x 4, 25 GbE RoCE (Horovod)", "resnet101", 512, "90%", "horovod-512", "horovod"),
    ("512 Pascal, 128 x 4, 25 GbE RoCE (Horovod)", "vgg16", 512, "68%", "horovod-512", "horovod"),
]

# --- links ---------------------------------------------------------------------------
# rate: bytes/s each way per device (NIC: per node); eff: the share of it a bulk transfer
# gets (protocol headers; 0.94 is what TCP got on the shaped veths here); alpha: seconds per
# message (software + wire latency, what a 4 KiB allreduce step costs).
LINKS = {
    "nvlink2": dict(rate=150e9, eff=0.87, alpha=5e-6,
                    what="NVLink 2 (V100 SXM2): 6 links x 25 GB/s each way, ~300 GB/s both ways; "
                         "0.87 = nccl-tests' ~130 GB/s bus bandwidth on a DGX-1V"),
    "nvlink1": dict(rate=80e9, eff=0.75, alpha=5e-6,
                    what="NVLink 1 (P100 DGX-1): 4 links x 20 GB/s each way"),
    "pcie3-host": dict(rate=48e9, eff=0.8, alpha=10e-6,
                       what="a DGX-1's 4 PCIe 3.0 x16 uplinks to the CPUs (12 GB/s each, 2 GPUs per switch)"),
    "pcie3": dict(rate=12e9, eff=0.8, alpha=10e-6, what="PCIe 3.0 x16 per GPU, GPUs of a node through their switch"),
    "pcie3-k80": dict(rate=6e9, eff=0.8, alpha=10e-6,
                      what="PCIe 3.0 x16 shared by the 2 GPUs of a K80 board, ~6 GB/s each way per GPU"),
    "10gbe": dict(rate=1.25e9, eff=0.94, alpha=30e-6, what="10 Gbit/s Ethernet, TCP"),
    "25gbe": dict(rate=3.125e9, eff=0.94, alpha=25e-6, what="25 Gbit/s Ethernet, TCP"),
    "25gbe-roce": dict(rate=3.125e9, eff=0.95, alpha=5e-6, what="25 Gbit/s Ethernet, RoCE (RDMA)"),
    "100gbe": dict(rate=12.5e9, eff=0.94, alpha=10e-6, what="100 Gbit/s Ethernet (RoCE or several TCP streams)"),
    "ib-hdr": dict(rate=25e9, eff=0.97, alpha=1.5e-6, what="InfiniBand HDR, 200 Gbit/s"),
}

# Systems: devices per node, the link inside a node, the host uplink (PS on the CPU), the
# network between nodes, and the reference compute.
SYSTEMS = {
    "dgx1-p100": dict(g=8, node="nvlink1", host="pcie3-host", net=None, gpu="P100"),
    "p2-k80": dict(g=8, node="pcie3-k80", host="pcie3-host", net="10gbe", gpu="K80"),
    "horovod-512": dict(g=4, node="pcie3", host="pcie3-host", net="25gbe-roce", gpu="P100"),
}
PREDICT_NETS = ["25gbe", "100gbe", "ib-hdr"]
PREDICT_SIZES = [8, 64, 512]
HOROVOD_FUSION = 64 * MiB
STRATEGIES = ["horovod", "hierarchical", "parameter_server"]


def link_beta(name):
    link = LINKS[name]
    return link["rate"] * link["eff"]


# --- compute ---------------------------------------------------------------------------
def read_compute(path):
    rows = {}
    with open(path) as f:
        for row in csv.DictReader(line for line in f if not line.startswith("#")):
            for key in ("batch", "threads", "params", "largest_params"):
                row[key] = int(row[key])
            for key in ("step_s", "fwd_gflops"):
                row[key] = float(row[key])
            rows[row["model"]] = row
    return rows


def find_cnnbench(given):
    if given:
        return given
    for build in ("build-bench", "build"):
        path = os.path.join(REPO, build, "bin", "cnnbench")
        if os.access(path, os.X_OK):
            return path
    return None


def model_info(cnnbench, model):
    """(layers, params, largest layer params, forward GFLOPs/image); layers in forward
    order as (params, forward MFLOPs)."""
    out = subprocess.run([cnnbench, f"--model={model}", "--model_info"], check=True,
                         capture_output=True, text=True).stdout
    layers = []
    for line in out.splitlines():
        m = re.match(r"^\S+\s+\S+\s+\[[^\]]*\]\s+(\d+)\s+([0-9.]+)$", line.strip())
        if m:
            layers.append((int(m.group(1)), float(m.group(2))))
    params = int(re.search(r"Trainable parameters: (\d+)", out).group(1))
    gflops = float(re.search(r"Forward GFLOPs per image: ([0-9.]+)", out).group(1))
    return layers, params, max(p for p, _ in layers), gflops


BWD_SHARE = 2.0 / 3.0  # backward's share of a step (the model's docstring says why)
SPEEDUP = 1.0  # --speedup: a device this many times faster than the reference computes


def gpu_step_s(model, compute, gpu, batch):
    """Reference compute per step at `batch` per device on `gpu` (P100 or K80), divided
    by --speedup, and how it was obtained."""
    t, how = reference_step_s(model, compute, gpu, batch)
    if SPEEDUP != 1.0:
        return t / SPEEDUP, f"{how}, / {SPEEDUP:g} (--speedup)"
    return t, how


def reference_step_s(model, compute, gpu, batch):
    table = P100_IPS if gpu == "P100" else K80_IPS
    if model in table:
        b, ips = table[model]
        return batch / ips, f"published {gpu} {ips:g} img/s at batch {b}"
    _, ips = table["resnet50"]
    here = compute[model]["step_s"] / compute[model]["batch"]  # seconds per image
    here_r50 = compute["resnet50"]["step_s"] / compute["resnet50"]["batch"]
    return batch * here / here_r50 / ips, f"measured here, x ResNet-50's {gpu}/here ratio"


# --- communication ---------------------------------------------------------------------
def ring(nbytes, n, beta, alpha):
    if n <= 1:
        return 0.0
    return 2 * (n - 1) / n * nbytes / beta + 2 * (n - 1) * alpha


class Placement:
    """n devices, g per node, the links between them."""

    def __init__(self, n, g, node, host, net):
        self.n, self.g = n, min(g, n)
        self.m = max(1, n // self.g)
        self.node, self.host, self.net = node, host, net

    def horovod(self, nbytes):
        if self.m == 1:
            return ring(nbytes, self.n, link_beta(self.node), LINKS[self.node]["alpha"])
        return ring(nbytes, self.n, link_beta(self.net), LINKS[self.net]["alpha"])

    def hierarchical(self, nbytes):
        t = ring(nbytes, self.g, link_beta(self.node), LINKS[self.node]["alpha"])
        if self.m > 1:
            t += ring(nbytes, self.m, link_beta(self.net), LINKS[self.net]["alpha"])
        return t

    def ps_phase(self, nbytes, largest):
        """One push (or one pull) of nbytes by every node, shards greedy by layer size."""
        if self.m == 1:  # the host CPU holds the variables: g devices through its uplinks
            return self.g * nbytes / link_beta(self.host) + self.g * LINKS[self.host]["alpha"]
        busiest = max(nbytes / self.m, largest)
        return (self.m - 1) * busiest / link_beta(self.net) + (self.m - 1) * LINKS[self.net]["alpha"]

    def ps_node_half(self, nbytes):
        """Summing inside the node before the push, or spreading the values after the
        pull: half a ring allreduce (a reduce-scatter, or an all-gather)."""
        if self.m == 1:
            return 0.0
        return ring(nbytes, self.g, link_beta(self.node), LINKS[self.node]["alpha"]) / 2


def exposed_in_forward(layers, t_fwd, per_byte):
    """The pull, sent in forward order as soon as the update is done: each layer's forward
    waits for its own values (tf's parameter server: every op reads its variables when it
    runs). Returns how much later than t_fwd the forward ends."""
    total = sum(f for _, f in layers) or 1.0
    arrived = end = 0.0
    for params, mflops in layers:
        start = end
        if params:
            arrived += 4 * params * per_byte
            start = max(end, arrived)
        end = start + t_fwd * mflops / total
    return max(0.0, end - t_fwd)


def ready_times(layers, t_bwd):
    """(bytes, ready time) per layer with parameters, in backward order: a layer's
    backward costs time in proportion to its forward FLOPs (uniform if none known)."""
    back = list(reversed(layers))
    total = sum(f for _, f in back) or 1.0
    out, done = [], 0.0
    for params, mflops in back:
        done += mflops
        if params:
            out.append((4 * params, t_bwd * done / total))
    return out


def uniform_layers(params):
    return [(params // 100, 1.0)] * 100


def exposed_after_backward(ready, bucket_bytes, cost, t_bwd):
    """Buckets of up to bucket_bytes in backward order, sent one at a time as they are
    ready; returns how long communication runs past the end of backward."""
    free, size, last_ready = 0.0, 0, 0.0
    for nbytes, at in ready:
        size += nbytes
        last_ready = at
        if size >= bucket_bytes:
            free = max(free, last_ready) + cost(size)
            size = 0
    if size:
        free = max(free, last_ready) + cost(size)
    return max(0.0, free - t_bwd)


def step_time(strategy, place, layers, t_fwd, t_bwd, nbytes, largest):
    ready = ready_times(layers, t_bwd)
    if place.n == 1:
        return t_fwd + t_bwd
    if strategy == "horovod":
        tail = exposed_after_backward(ready, HOROVOD_FUSION, place.horovod, t_bwd)
    elif strategy == "hierarchical":
        tail = exposed_after_backward(ready, HOROVOD_FUSION, place.hierarchical, t_bwd)
    elif strategy == "parameter_server":
        # Pushes leave layer by layer during backward (after the node's sum); the pull
        # (then spreading the values in the node) starts after the update and feeds the
        # next forward layer by layer.
        phase = place.ps_phase(nbytes, largest) + place.ps_node_half(nbytes)
        per_byte = phase / nbytes
        tail = exposed_after_backward(ready, 1, lambda b: per_byte * b, t_bwd)
        if place.m == 1:
            tail += exposed_in_forward(layers, t_fwd, per_byte)
        else:
            tail += phase
    else:
        raise ValueError(strategy)
    return t_fwd + t_bwd + tail


class ModelFacts:
    def __init__(self, name, compute, cnnbench):
        row = compute[name]
        self.name = name
        self.params, self.largest = row["params"], row["largest_params"]
        self.bwd_share = BWD_SHARE
        self.layers = None
        if cnnbench:
            try:
                self.layers = model_info(cnnbench, name)[0]
            except (OSError, subprocess.CalledProcessError):
                self.layers = None
        self.uniform = self.layers is None
        if self.uniform:
            self.layers = uniform_layers(self.params)
        self.nbytes = 4 * self.params

    def efficiency(self, strategy, place, t_compute):
        t_fwd = t_compute * (1 - self.bwd_share)
        t_bwd = t_compute * self.bwd_share
        t = step_time(strategy, place, self.layers, t_fwd, t_bwd, self.nbytes, 4 * self.largest)
        return t_compute / t


# --- tables ------------------------------------------------------------------------------
def default_batch(model):
    return 512 if model == "alexnet" else 64


def print_links():
    print("| link | rate each way | efficiency | beta (effective) | alpha |")
    print("|---|---:|---:|---:|---:|")
    for name, link in LINKS.items():
        print(f"| {name}: {link['what']} | {link['rate'] / 1e9:g} GB/s | {link['eff']:.2f} | "
              f"{link_beta(name) / 1e9:.2f} GB/s | {link['alpha'] * 1e6:g} us |")


def predictions(compute, cnnbench, models):
    faster = f" computing {SPEEDUP:g}x faster than a P100 (--speedup)" if SPEEDUP != 1.0 else ""
    print(f"Predicted weak-scaling efficiency on P100-class devices{faster}, nodes of 8 GPUs joined by "
          "NVLink 2 (a DGX-1V's links; only the network changes between rows), batch 64 per "
          "device (AlexNet 512), fp32 gradients:")
    print()
    print("| model | grad MB | largest layer | P100 step | devices | network | "
          + " | ".join(STRATEGIES) + " | picks |")
    print("|---|---:|---:|---:|---:|---|" + "---:|" * len(STRATEGIES) + "---|")
    picks = {}
    for model in models:
        facts = ModelFacts(model, compute, cnnbench)
        batch = default_batch(model)
        t_compute, how = gpu_step_s(model, compute, "P100", batch)
        for n in PREDICT_SIZES:
            nets = [None] if n <= 8 else PREDICT_NETS
            for net in nets:
                place = Placement(n, 8, "nvlink2", "pcie3-host", net)
                effs = {s: facts.efficiency(s, place, t_compute) for s in STRATEGIES}
                # Ties at the printed precision go to the first listed: the flat ring, the
                # simplest to run (no node layout, no host).
                best = max(STRATEGIES, key=lambda s: (round(effs[s], 2), -STRATEGIES.index(s)))
                picks.setdefault(model, []).append((n, net or "NVLink only", best, effs))
                print(f"| {model} | {facts.nbytes / 1e6:.0f} | {100 * facts.largest / facts.params:.0f}% | "
                      f"{1000 * t_compute:.0f} ms | {n} | {net or '(1 node)'} | "
                      + " | ".join(f"{100 * effs[s]:.0f}%" for s in STRATEGIES)
                      + f" | {best} |")
    print()
    return picks


def published(compute, cnnbench):
    print("The model beside the published figures (the same systems, the strategy they used):")
    print()
    print("| system | model | published | model's prediction | strategy | reference compute |")
    print("|---|---|---|---:|---|---|")
    for what, model, n, figure, key, strategy in PUBLISHED:
        if model not in compute:
            print(f"| {what} | {model} | {figure} | (not measured) | {strategy} | |")
            continue
        sys_ = SYSTEMS[key]
        facts = ModelFacts(model, compute, cnnbench)
        t_compute, how = gpu_step_s(model, compute, sys_["gpu"], 64)
        place = Placement(n, sys_["g"], sys_["node"], sys_["host"], sys_["net"])
        eff = facts.efficiency(strategy, place, t_compute)
        pred = f"{100 * eff:.0f}%" if figure.endswith("%") else f"{n * eff:.2f}x ({100 * eff:.0f}%)"
        print(f"| {what} | {model} | {figure} | {pred} | {strategy} | "
              f"{1000 * t_compute:.0f} ms/step ({how}) |")
    print()


def explain(picks, compute):
    print("What it picks, and why (the numbers are per step, fp32 gradients, 64 MiB buckets):")
    print()
    for model, rows in picks.items():
        row = compute[model]
        nbytes, largest = 4 * row["params"], 4 * row["largest_params"]
        chosen = {}
        for n, net, best, effs in rows:
            chosen.setdefault(best, []).append(f"{n} on {net}")
        where = "; ".join(f"{s} for {', '.join(w)}" for s, w in chosen.items())
        buckets = math.ceil(nbytes / HOROVOD_FUSION)
        n, g = 512, 8
        m = n // g
        a_net = LINKS["25gbe"]["alpha"]
        flat_lat = buckets * 2 * (n - 1) * a_net
        hier_lat = buckets * (2 * (g - 1) * LINKS["nvlink2"]["alpha"] + 2 * (m - 1) * a_net)
        busiest = max(nbytes / m, largest)
        print(f"- **{model}**: {where}. Its {nbytes / 1e6:.0f} MB of gradients go in {buckets} "
              f"bucket(s); at 512 devices on 25 GbE the flat ring pays {1000 * flat_lat:.0f} ms of "
              f"latency per step against the hierarchical ring's {1000 * hier_lat:.1f} ms, for the "
              f"same {2 * (m - 1) / m * nbytes / 1e6:.0f} MB through each NIC. A parameter-server "
              f"phase puts {busiest / 1e6:.0f} MB per peer node on the busiest shard "
              f"({'its largest layer, ' + format(100 * largest / nbytes, '.0f') + '% of the bytes' if largest > nbytes / m else 'an even share: B/m'}), "
              f"x {m - 1} peers each way.")
    print()
    print("In one node every strategy's traffic rides NVLink (or, for the CPU parameter "
          "server, the PCIe uplinks) and hides under the compute, so all reach ~100%; ties "
          "go to the flat ring, which needs neither a host nor a node layout. Across nodes "
          "the flat and the hierarchical ring put the same bytes through each NIC, so the "
          "hierarchical ring wins by latency, most on TCP Ethernet at 512 devices. The "
          "parameter server wins nowhere across nodes: its push hides under backward as the "
          "ring's buckets do, but its pull comes after the update, in the open; at 8 nodes "
          "ResNet-50's and InceptionV3's shards still balance (largest layer under B/m) and "
          "it is a few points behind, while at 64 nodes B/m is smaller than their largest "
          "layer, and for VGG16 and AlexNet one fully connected layer (fc6) is most of the "
          "bytes at any size: the shard holding it takes that layer from every node.")
    print()


# --- measuring the compute here ---------------------------------------------------------
def run_cnnbench(cnnbench, args):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    proc = subprocess.run([cnnbench] + args, capture_output=True, text=True,
                          env=dict(os.environ, OMP_NUM_THREADS=args_threads(args)))
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    m = re.search(r"total images/sec: ([0-9.]+)", proc.stdout)
    if proc.returncode != 0 or not m:
        sys.exit(f"scaling_model.py: cnnbench {' '.join(args)} failed:\n{proc.stdout}{proc.stderr}")
    return float(m.group(1)), 100 * cpu / wall


def args_threads(args):
    for a in args:
        if a.startswith("--num_intra_threads="):
            return a.split("=", 1)[1]
    return "1"


def measure(opts):
    cnnbench = find_cnnbench(opts.get("cnnbench"))
    if not cnnbench:
        sys.exit("scaling_model.py: no cnnbench (build first, or --cnnbench=PATH)")
    batch, steps, warmup, threads = (int(opts.get(k, d)) for k, d in
                                     (("batch", 32), ("steps", 5), ("warmup", 1), ("threads", 2)))
    models = opts.get("models", "resnet50,inception3,vgg16,alexnet,resnet101").split(",")
    commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip() or "unknown"
    path = opts.get("compute", os.path.join(HERE, "scaling_compute.csv"))
    repeat = int(opts.get("repeat", 3))
    rows = []
    for model in models:
        common = [f"--model={model}", f"--batch_size={batch}", f"--num_batches={steps}",
                  f"--num_warmup_batches={warmup}", "--optimizer=momentum", "--device=cpu",
                  f"--num_intra_threads={threads}"]
        # The fastest of `repeat` runs: on a machine others share, the fastest is the one
        # that had the cores to itself.
        ips, cpu = max(run_cnnbench(cnnbench, common) for _ in range(repeat))
        _, params, largest, gflops = model_info(cnnbench, model)
        when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        rows.append(dict(model=model, batch=batch, threads=threads, step_s=f"{batch / ips:.4f}",
                         params=params, largest_params=largest, fwd_gflops=f"{gflops:.3f}",
                         cpu_pct=f"{cpu:.0f}", measured=f"{when} {commit}"))
        print(f"{model}: {ips:.2f} img/s training (best of {repeat}), CPU {cpu:.0f}%", flush=True)
    with open(path, "w") as f:
        f.write("# Compute per model measured on this machine for bench/scaling_model.py\n"
                "# (scaling_model.py --measure: cnnbench training runs,\n"
                f"# fp32, momentum SGD, synthetic data, {warmup} warm-up + {steps} timed steps,\n"
                f"# the fastest of {repeat} runs of each;\n"
                f"# {os.uname().nodename}, {os.cpu_count()} cores). Columns: see the script.\n")
        writer = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {path}")


# --- validation against measured allreduces ---------------------------------------------
def read_allreduce(path):
    """(ranks, [(bytes, seconds)]) from `allreduce_bench mpi` output: a title line
    "# MPI_Allreduce across N ranks ..." and rows: size count type redop time(us) algbw
    busbw #wrong."""
    ranks, points = None, []
    with open(path) as f:
        for line in f:
            m = re.match(r"# MPI_Allreduce across (\d+) ranks", line)
            if m:
                ranks = int(m.group(1))
            fields = line.split()
            if len(fields) == 8 and fields[0].isdigit():
                points.append((int(fields[0]), float(fields[4]) * 1e-6))
    return ranks, points


def fit_alpha_beta(n, points):
    """Least squares of t = 2(n-1) alpha + 2(n-1)/n x bytes / beta over the points, each
    weighted by 1/t (relative error), so small and large sizes both count."""
    xs = [2 * (n - 1) / n * b for b, _ in points]
    ts = [t for _, t in points]
    w = [1 / t ** 2 for t in ts]
    sw = sum(w)
    sx = sum(wi * x for wi, x in zip(w, xs))
    st = sum(wi * t for wi, t in zip(w, ts))
    sxx = sum(wi * x * x for wi, x in zip(w, xs))
    sxt = sum(wi * x * t for wi, x, t in zip(w, xs, ts))
    slope = (sw * sxt - sx * st) / (sw * sxx - sx * sx)
    intercept = (st - slope * sx) / sw
    return max(intercept, 0.0) / (2 * (n - 1)), 1 / slope


def validate(files, opts, compute, cnnbench):
    print("Alpha-beta fitted to MPI_Allreduce over each link (`allreduce_bench mpi`, 2 ranks):")
    print()
    print("| link | alpha | beta (busbw) | shaped rate | beta / rate | worst misfit (size) |")
    print("|---|---:|---:|---:|---:|---|")
    fitted = []
    for path in files:
        label = re.sub(r"^allreduce-|\.txt$", "", os.path.basename(path))
        n, points = read_allreduce(path)
        if not n or len(points) < 3:
            print(f"| {label} | (no data in {path}) | | | | |")
            continue
        alpha, beta = fit_alpha_beta(n, points)
        worst = max(points, key=lambda p: abs(ring(p[0], n, beta, alpha) / p[1] - 1))
        miss = ring(worst[0], n, beta, alpha) / worst[1] - 1
        m = re.search(r"(\d+)(g|m)bit", label)
        rate = int(m.group(1)) * (1e9 if m.group(2) == "g" else 1e6) / 8 if m else None
        shaped = f"{rate / 1e9:.3f} GB/s | {beta / rate:.2f}" if rate else "(unshaped) | -"
        print(f"| {label} | {alpha * 1e6:.0f} us | {beta / 1e9:.3f} GB/s | {shaped} | "
              f"{100 * miss:+.0f}% ({worst[0]} B) |")
        fitted.append((label, n, alpha, beta))
    print()
    step_s = opts.get("step-s")
    model = opts.get("model", "resnet50")
    if step_s and fitted and model in compute:
        facts = ModelFacts(model, compute, cnnbench)
        t = float(step_s)
        print(f"Predicted 2-rank efficiency of {model} at {t:.2f} s of compute per step "
              f"(this machine's 1-rank step; backward {100 * facts.bwd_share:.0f}% of it) "
              "on each fitted link, with the overlap assumption above:")
        print()
        print("| link | " + " | ".join(["horovod", "parameter_server"]) + " | horovod, no overlap |")
        print("|---|---:|---:|---:|")
        for label, n, alpha, beta in fitted:
            LINKS["_fit"] = dict(rate=beta, eff=1.0, alpha=alpha, what=label)
            place = Placement(n, 1, "_fit", "_fit", "_fit")
            e_h = facts.efficiency("horovod", place, t)
            e_p = facts.efficiency("parameter_server", place, t)
            no_overlap = t / (t + ring(facts.nbytes, n, beta, alpha))
            print(f"| {label} | {100 * e_h:.0f}% | {100 * e_p:.0f}% | {100 * no_overlap:.0f}% |")
        print()


def parse_args(argv):
    opts, files = {}, []
    for a in argv:
        if a.startswith("--"):
            key, _, value = a[2:].partition("=")
            opts[key] = value if _ else True
        else:
            files.append(a)
    known = {"compute", "cnnbench", "measure", "models", "batch", "steps", "warmup", "threads", "repeat",
             "validate", "step-s", "model", "speedup", "help"}
    for key in opts:
        if key not in known:
            sys.exit(f"scaling_model.py: unknown option --{key} (known: "
                     + ", ".join("--" + k for k in sorted(known)) + ")")
    return opts, files


def main(argv):
    opts, files = parse_args(argv)
    global SPEEDUP
    SPEEDUP = float(opts.get("speedup", 1.0))
    if "help" in opts:
        print(__doc__)
        return
    if "measure" in opts:
        measure(opts)
        return
    path = opts.get("compute", os.path.join(HERE, "scaling_compute.csv"))
    if not os.path.exists(path):
        sys.exit(f"scaling_model.py: no {path}: run scaling_model.py --measure first")
    compute = read_compute(path)
    cnnbench = find_cnnbench(opts.get("cnnbench"))
    if "validate" in opts:
        validate(files, opts, compute, cnnbench)
        return
    if not cnnbench:
        print("(no cnnbench binary: gradients taken as ready uniformly over backward)\n")
    print_links()
    print()
    models = [m for m in ("resnet50", "inception3", "vgg16", "alexnet") if m in compute]
    picks = predictions(compute, cnnbench, models)
    explain(picks, compute)
    published(compute, cnnbench)


if __name__ == "__main__":
    main(sys.argv[1:])
