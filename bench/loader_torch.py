#!/usr/bin/python3
"""PyTorch's side of the image-folder loader bench (bench/loader.sh).

Loads DIR/train with torchvision's ImageFolder through a DataLoader (batch B, shuffled,
K worker processes, the rest PyTorch's defaults) and the transforms of an ImageNet run:
--train (the default): RandomResizedCrop(S) (scale 0.08-1, ratio 3/4-4/3), a random
horizontal flip, ToTensor, Normalize(ImageNet mean and std); --test: Resize(S * 8 // 7),
CenterCrop(S), ToTensor, Normalize. Times N batches after 2 of warm-up (the workers
starting, the first files read) and prints one line:
  torch: IMAGES images in SECONDS s: RATE images/s (K workers, batch B, size S)
With --train-net CFG it also trains the net of that vdnn config (bench/torch_step.py
builds it: same layers, SGD of its [train] section) on the batches, N timed steps after
2, with --threads compute threads, and the line starts "torch train:".
Workers persist across epochs (persistent_workers), so a run longer than an epoch
does not time PyTorch restarting its worker processes.
Usage: loader_torch.py DIR [--workers K] [--batch B] [--batches N] [--size S]
                           [--train | --test] [--train-net CFG] [--threads T] [--seed N]
"""
import argparse
import itertools
import os
import sys
import time

import torch
import torch.nn as nn
from torchvision import datasets, transforms

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
WARMUP = 2


def make_transform(size, train):
    if train:
        head = [transforms.RandomResizedCrop(size), transforms.RandomHorizontalFlip()]
    else:
        head = [transforms.Resize(size * 8 // 7), transforms.CenterCrop(size)]
    return transforms.Compose(head + [transforms.ToTensor(), transforms.Normalize(MEAN, STD)])


def endless(loader):
    """The loader's batches, epoch after epoch."""
    while True:
        yield from loader


def time_batches(batches, count, step=None):
    """Takes WARMUP batches, then times `count` more (each given to `step` if there is
    one); returns (images, seconds)."""
    for x, y in itertools.islice(batches, WARMUP):
        if step:
            step(x, y)
    images = 0
    t0 = time.perf_counter()
    for x, y in itertools.islice(batches, count):
        if step:
            step(x, y)
        images += x.shape[0]
    return images, time.perf_counter() - t0


def make_step(cfg, size):
    """A training step of the net of vdnn config cfg, built by bench/torch_step.py."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import torch_step
    sections = torch_step.parse_cfg(cfg)
    net_kv = sections[0][1]
    if (int(net_kv["channels"]), int(net_kv["height"]), int(net_kv["width"])) != (3, size, size):
        sys.exit(f"loader_torch.py: {cfg}: the net's input is not 3 x {size} x {size}")
    model, _, _, train = torch_step.build(sections)
    opt = torch.optim.SGD(model.parameters(), lr=float(train["learning_rate"]),
                          momentum=float(train.get("momentum", 0)), weight_decay=float(train.get("weight_decay", 0)))
    loss_fn = nn.CrossEntropyLoss()

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()
    return step


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--size", type=int, default=224)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--train", dest="train", action="store_true", default=True)
    mode.add_argument("--test", dest="train", action="store_false")
    ap.add_argument("--train-net", metavar="CFG")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    # the loader's work is the workers'; the main process only collates (and trains)
    torch.set_num_threads(a.threads if a.train_net else 1)
    data = datasets.ImageFolder(os.path.join(a.dir, "train"), make_transform(a.size, a.train))
    loader = torch.utils.data.DataLoader(data, batch_size=a.batch, shuffle=True, num_workers=a.workers,
                                         persistent_workers=a.workers > 0)
    step = make_step(a.train_net, a.size) if a.train_net else None
    images, secs = time_batches(endless(loader), a.batches, step)
    what = "torch train" if step else "torch"
    extra = f", {a.threads} compute thread{'s' if a.threads != 1 else ''}" if step else ""
    print(f"{what}: {images} images in {secs:.3f} s: {images / secs:.1f} images/s "
          f"({a.workers} workers, batch {a.batch}, size {a.size}{extra})")


if __name__ == "__main__":
    main()
