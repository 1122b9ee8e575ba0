#!/usr/bin/python3
"""Writes torchvision's CNNs (random weights) as ONNX backend tests for `vdnn onnx-test`.

    /usr/bin/python3 bench/onnx_models.py OUTDIR [--models a,b,...] [--opsets 11,13,17]
        [--batch 1] [--size 224] [--seed 1] [--threads N] [--bn calibrated|random]

For each model and opset: OUTDIR/<model>-opset<N>/model.onnx and
OUTDIR/<model>-opset<N>/test_data_set_0/{input_0,output_0}.pb, the layout of ONNX's
backend tests (onnx/backend/test/data/node/*): one input drawn normal(0, 1) from a
generator seeded with --seed, shape (batch, 3, size, size), and PyTorch's own output of
the model in eval mode. Every model is built after torch.manual_seed(--seed) with
weights=None; its BatchNorm2d layers then get seeded random statistics and affine
parameters (randomize_batchnorm: by default their measured statistics perturbed), since
a fresh model's mean 0 / var 1 would make batch norm an identity that any importer
passes. Exported with do_constant_folding=True in eval mode, which folds a batch norm
that follows a convolution into it: BatchNormalization nodes remain only where a batch
norm follows something else (densenet121, tinycnn). Prints one line per test: model,
opset, nodes, the std of the output and how much of it the input moves (the std of the
difference from a second input's output: near 0, the test could not tell a wrong
convolution), the op types used with their counts, and those outside the list vdnn
imports. Every model.onnx passes onnx.checker.check_model(full_check=True).

Models: alexnet, resnet18, googlenet, densenet121, mobilenet_v2, resnext50_32x4d,
squeezenet1_0 (torchvision, --size x --size), and tinycnn (defined here, always 32x32):
a small net of every layer vdnn's test suite exports cheaply.

Needs Debian's python3-torch (1.13, CPU), python3-torchvision, python3-onnx (1.12).
"""
import argparse
import os
import sys
import warnings

import numpy as np
import onnx
from onnx import numpy_helper
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

TORCHVISION = ["alexnet", "resnet18", "googlenet", "densenet121", "mobilenet_v2",
               "resnext50_32x4d", "squeezenet1_0"]
MODELS = TORCHVISION + ["tinycnn"]
TINY_SIZE = 32

# The op types vdnn's importer takes (MatMul only with an Add after it).
VDNN_OPS = {"Conv", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Relu",
            "LeakyRelu", "Clip", "Sigmoid", "Tanh", "BatchNormalization", "LRN", "Dropout",
            "Gemm", "MatMul", "Add", "Flatten", "Reshape", "Concat", "Softmax", "Identity",
            "Constant"}

class _LRN(torch.autograd.Function):
    """nn.LocalResponseNorm's arithmetic, exported as one ONNX LRN node.

    torch.onnx has no symbolic for local_response_norm (a Python composition of mul,
    pad, avg_pool and pow): it exports as about 40 nodes of Unsqueeze, Pad, Shape,
    Gather, If, Pow, Div. For an odd size ONNX's LRN sums the same channels
    (floor((size-1)/2) before, ceil((size-1)/2) after) with the same alpha / size."""

    @staticmethod
    def forward(ctx, x, size, alpha, beta, k):  # pylint: disable=arguments-differ
        return F.local_response_norm(x, size, alpha, beta, k)

    @staticmethod
    def symbolic(g, x, size, alpha, beta, k):
        return g.op("LRN", x, size_i=size, alpha_f=alpha, beta_f=beta, bias_f=k)


class LRN(nn.LocalResponseNorm):
    def forward(self, x):
        assert self.size % 2 == 1, "ONNX's LRN matches torch's for odd sizes only"
        return _LRN.apply(x, self.size, self.alpha, self.beta, self.k)


class TinyCNN(nn.Module):
    """3x32x32 -> 10: grouped and dilated convolutions, batch norm (one folded into its
    convolution by the exporter, one after an add, which stays BatchNormalization), ReLU,
    ReLU6 (Clip), LeakyReLU(0.1), Sigmoid, Tanh, max pooling with ceil_mode, average
    pooling with padding not counted, LRN, a residual add, a channel concat, global
    average pooling, flatten and a linear layer (Gemm)."""

    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 16, 3, padding=1, groups=2)
        self.bn2 = nn.BatchNorm2d(16)
        self.leaky = nn.LeakyReLU(0.1)
        self.pool1 = nn.MaxPool2d(3, 2, ceil_mode=True)            # 32 -> 16
        self.dilated = nn.Conv2d(16, 8, 3, padding=2, dilation=2)
        self.point = nn.Conv2d(16, 8, 1)
        self.lrn = LRN(5)
        self.pool2 = nn.AvgPool2d(3, 2, padding=1, count_include_pad=False)  # 16 -> 8
        self.conv3 = nn.Conv2d(16, 32, 3, padding=1)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, classes)

    def forward(self, x):
        a = F.relu(self.bn1(self.conv1(x)))
        b = F.relu6(self.conv2(a))
        x = self.leaky(self.bn2(a + b))
        x = self.pool1(x)
        x = torch.cat([torch.sigmoid(self.dilated(x)), torch.tanh(self.point(x))], 1)
        x = self.pool2(self.lrn(x))
        x = F.relu(self.conv3(x))
        return self.fc(torch.flatten(self.gap(x), 1))


def build(name):
    if name == "tinycnn":
        return TinyCNN()
    ctor = getattr(torchvision.models, name)
    if name == "googlenet":
        return ctor(weights=None, aux_logits=False, init_weights=True, transform_input=False)
    return ctor(weights=None)


def calibrate_batchnorm(model, size, seed, batch=4):
    """Sets every BatchNorm2d's running statistics to those of its input over a batch of
    seeded normal(0, 1) images (the layers normalizing with batch statistics)."""
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    if not bns:
        return
    momenta = [m.momentum for m in bns]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # a cumulative average: after one batch, that batch's statistics
    model.train()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        model(torch.randn(batch, 3, size, size, generator=g))
    for m, momentum in zip(bns, momenta):
        m.momentum = momentum


def randomize_batchnorm(model, size, seed, mode):
    """Gives every BatchNorm2d seeded random statistics and affine parameters, so that a
    batch norm is never the identity that a fresh model's mean 0, var 1, weight 1 and
    bias 0 make it (an importer that dropped it would pass).

    random:     running_var uniform in [0.5, 2]; running_mean, weight and bias normal(0,
                0.1). A weight of about 0.1 divides the activations by about ten at each
                batch norm, and statistics unrelated to the activations do not restore
                their scale: through tens of them the output no longer depends on the
                input (resnet18: outputs of two inputs differ by 1e-5 of their size,
                googlenet and mobilenet_v2 not at all), and a wrong convolution passes.
    calibrated: (default) the statistics measured by calibrate_batchnorm, then
                running_mean + normal(0, 0.1) * its std, running_var * uniform [0.5, 2],
                weight 1 + normal(0, 0.1), bias normal(0, 0.1): every batch norm still
                differs from the identity and from its true statistics, the activations
                keep their scale, and the output depends on the input."""
    if mode == "calibrated":
        calibrate_batchnorm(model, size, seed)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if not isinstance(m, nn.BatchNorm2d):
                continue
            c = m.num_features
            mean = torch.randn(c, generator=g) * 0.1
            scale = 0.5 + 1.5 * torch.rand(c, generator=g)
            weight = torch.randn(c, generator=g) * 0.1
            bias = torch.randn(c, generator=g) * 0.1
            if mode == "calibrated":
                mean = m.running_mean + mean * m.running_var.sqrt()
                scale = m.running_var * scale
                weight = weight + 1
            m.running_mean.copy_(mean)
            m.running_var.copy_(scale)
            m.weight.copy_(weight)
            m.bias.copy_(bias)


def write_tensor(path, arr, name):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(np.ascontiguousarray(arr), name).SerializeToString())


def ops_summary(model):
    counts = {}
    for n in model.graph.node:
        counts[n.op_type] = counts.get(n.op_type, 0) + 1
    return counts


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("outdir")
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--opsets", default="13")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: as is)")
    p.add_argument("--bn", choices=["calibrated", "random"], default="calibrated",
                   help="batch norms' statistics (see randomize_batchnorm)")
    a = p.parse_args()
    models = [m for m in a.models.split(",") if m]
    for m in models:
        if m not in MODELS:
            p.error(f"unknown model {m!r}; one of {', '.join(MODELS)}")
    opsets = [int(o) for o in a.opsets.split(",") if o]
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    # The exporter's shape-inference and constant-folding warnings are not about us.
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)  # g.op in _LRN.symbolic
    os.makedirs(a.outdir, exist_ok=True)

    for name in models:
        torch.manual_seed(a.seed)
        model = build(name)
        size = TINY_SIZE if name == "tinycnn" else a.size
        randomize_batchnorm(model, size, a.seed, a.bn)
        model.eval()
        gen = torch.Generator().manual_seed(a.seed)
        x = torch.randn(a.batch, 3, size, size, generator=gen)
        with torch.no_grad():
            y = model(x)
            other = model(torch.randn(x.shape, generator=gen))
        for opset in opsets:
            d = os.path.join(a.outdir, f"{name}-opset{opset}")
            os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
            path = os.path.join(d, "model.onnx")
            with torch.no_grad():
                torch.onnx.export(model, x, path, opset_version=opset, do_constant_folding=True,
                                  input_names=["input"], output_names=["output"],
                                  training=torch.onnx.TrainingMode.EVAL)
            onnx_model = onnx.load(path)
            onnx.checker.check_model(onnx_model, full_check=True)
            write_tensor(os.path.join(d, "test_data_set_0", "input_0.pb"), x.numpy(), "input")
            write_tensor(os.path.join(d, "test_data_set_0", "output_0.pb"), y.numpy(), "output")
            counts = ops_summary(onnx_model)
            ops = " ".join(f"{k}:{v}" for k, v in sorted(counts.items()))
            extra = sorted(set(counts) - VDNN_OPS)
            print(f"{name} opset {opset}: {len(onnx_model.graph.node)} nodes, "
                  f"output std {float(y.std()):.3g}, by input {float((y - other).std()):.3g}; {ops}"
                  + (f"; not in vdnn's list: {' '.join(extra)}" if extra else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
