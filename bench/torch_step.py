#!/usr/bin/python3
"""Times training steps of a vdnn config in PyTorch, on the CPU or a GPU, as the peer to compare with.

Builds the same net as vdnn from the config file (same layers, shapes, batch, SGD with
momentum and weight decay), trains on random data of the same shape, and prints the
median step time in ms after warm-up; with --images-per-s, "MS ms/step IPS images/s".
On a GPU (--device cuda) the data lives on the GPU, cuDNN picks its fastest algorithms
(cudnn.benchmark), every step is timed between two torch.cuda.synchronize() calls, and
--tf32 0 (the default) keeps convolutions and matrix products in strict FP32.
Usage: torch_step.py CFG [--steps N] [--warmup N] [--threads N] [--batch N]
                         [--device cpu|cuda] [--tf32 0|1] [--images-per-s] [--profile FILE]
--profile FILE: after the timed steps, five more under torch.profiler, whose table of
operators and kernels (by self time on the device, or on the CPU) goes to FILE.
"""
import argparse
import statistics
import time

import torch
import torch.nn as nn


def parse_cfg(path):
    sections = []
    for raw in open(path):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("["):
            sections.append((line.strip("[] "), {}))
        else:
            key, value = (s.strip() for s in line.split("=", 1))
            sections[-1][1][key] = value
    return sections


class Graph(nn.Module):
    """The net as vdnn reads it: map 0 is the input, map j + 1 layer j's output; each
    layer reads the maps its `input` key names (the previous one by default)."""

    def __init__(self, nodes):
        super().__init__()
        self.kinds = [k for k, _, _ in nodes]
        self.reads = [r for _, _, r in nodes]
        self.mods = nn.ModuleList(m for _, m, _ in nodes)

    def forward(self, x):
        maps = [x]
        for kind, reads, mod in zip(self.kinds, self.reads, self.mods):
            xs = [maps[i] for i in reads]
            if kind == "add":
                y = xs[0]
                for t in xs[1:]:
                    y = y + t
            elif kind == "concat":
                y = torch.cat(xs, 1)
            else:
                y = mod(xs[0])
            maps.append(y)
        return maps[-1]


def out_side(n, k, s, p):
    return (n + 2 * p - k) // s + 1


def build(sections):
    net = dict(sections[0][1])
    shapes = [[int(net["channels"]), int(net["height"]), int(net["width"])]]
    names = {"data": 0}
    train = next(s for n, s in sections if n == "train")
    nodes, classes = [], 0
    for name, kv in sections:
        if name in ("net", "train", "data", "memory"):
            continue
        g = lambda k, d=None: kv.get(k, d)
        j = len(nodes)   # this layer's output is map j + 1
        reads = []
        for ref in (g("input") or "-1").split(","):
            ref = ref.strip()
            reads.append(j + 1 + int(ref) if ref.lstrip("-").isdigit() else names[ref])
        shape = shapes[reads[0]]
        mod = nn.Identity()
        if name == "convolutional":
            k, s, p, f = int(g("size")), int(g("stride", 1)), int(g("pad", 0)), int(g("filters"))
            mod = nn.Conv2d(shape[0], f, k, s, p, groups=int(g("groups", 1)), bias=g("bias", "1") == "1")
            shape = [f, out_side(shape[1], k, s, p), out_side(shape[2], k, s, p)]
        elif name in ("maxpool", "avgpool"):
            k = int(g("size")); s = int(g("stride", k)); p = int(g("pad", 0))
            mod = (nn.MaxPool2d if name == "maxpool" else nn.AvgPool2d)(k, s, p)
            shape = [shape[0], out_side(shape[1], k, s, p), out_side(shape[2], k, s, p)]
        elif name == "relu":
            mod = nn.ReLU()
        elif name == "leaky":
            mod = nn.LeakyReLU(float(g("slope", 0.01)))
        elif name == "tanh":
            mod = nn.Tanh()
        elif name == "sigmoid":
            mod = nn.Sigmoid()
        elif name == "connected":
            classes = int(g("output"))
            mod = nn.Sequential(nn.Flatten(), nn.Linear(shape[0] * shape[1] * shape[2], classes,
                                                        bias=g("bias", "1") == "1"))
            shape = [classes, 1, 1]
        elif name == "batchnorm":
            mod = nn.BatchNorm2d(shape[0], momentum=float(g("momentum", 0.1)), eps=float(g("eps", 1e-5)))
        elif name == "dropout":
            mod = nn.Dropout(float(g("probability", 0.5)))
        elif name == "lrn":
            mod = nn.LocalResponseNorm(int(g("size", 5)), float(g("alpha", 1e-4)), float(g("beta", 0.75)),
                                       float(g("k", 1)))
        elif name == "concat":
            shape = [sum(shapes[i][0] for i in reads), shape[1], shape[2]]
        elif name not in ("add", "softmax"):
            raise SystemExit(f"torch_step.py: no PyTorch peer for [{name}]")
        nodes.append((name, mod, reads))
        shapes.append(shape)
        if g("name"):
            names[g("name")] = j + 1
    return Graph(nodes), int(net["batch"]), classes, train


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cfg")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--tf32", type=int, choices=(0, 1), default=0)
    ap.add_argument("--images-per-s", action="store_true")
    ap.add_argument("--profile", metavar="FILE")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    cuda = a.device == "cuda"
    if cuda:
        # PyTorch lets cuDNN use TF32 by default; vdnn's strict FP32 is the fair peer of --tf32 0
        torch.backends.cuda.matmul.allow_tf32 = bool(a.tf32)
        torch.backends.cudnn.allow_tf32 = bool(a.tf32)
        torch.backends.cudnn.benchmark = True
    sections = parse_cfg(a.cfg)
    model, batch, classes, train = build(sections)
    batch = a.batch or batch
    net = sections[0][1]
    x = torch.randn(batch, int(net["channels"]), int(net["height"]), int(net["width"]))
    y = torch.randint(0, classes, (batch,))
    if cuda:
        model, x, y = model.cuda(), x.cuda(), y.cuda()
    opt = torch.optim.SGD(model.parameters(), lr=float(train["learning_rate"]),
                          momentum=float(train.get("momentum", 0)), weight_decay=float(train.get("weight_decay", 0)))
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    times = []
    for i in range(a.warmup + a.steps):
        if cuda:
            torch.cuda.synchronize()   # the clock starts when the GPU is idle, and stops when it is again
        t0 = time.perf_counter()
        step()
        if cuda:
            torch.cuda.synchronize()
        if i >= a.warmup:
            times.append(1e3 * (time.perf_counter() - t0))
    ms = statistics.median(times)
    if a.profile:
        from torch.profiler import ProfilerActivity, profile
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        with profile(activities=acts) as prof:
            for _ in range(5):
                step()
            if cuda:
                torch.cuda.synchronize()
        avg = prof.key_averages()
        key = "self_cpu_time_total"
        if cuda:   # PyTorch 2.4 renamed the CUDA columns
            key = "self_device_time_total" if hasattr(avg[0], "self_device_time_total") else "self_cuda_time_total"
        with open(a.profile, "w") as f:
            f.write(f"# {a.cfg}, batch {batch}, device {a.device}, tf32 {a.tf32}: five steps, median step {ms:.3f} ms\n")
            f.write(avg.table(sort_by=key, row_limit=80, max_name_column_width=90) + "\n")
    if a.images_per_s:
        print(f"{ms:.3f} ms/step {1e3 * batch / ms:.1f} images/s")
    else:
        print(f"{ms:.3f}")


if __name__ == "__main__":
    main()
