#!/usr/bin/python3
"""Writes a folder of JPEG "photos" for the image-folder loader bench (bench/loader.sh).

OUT/train/<class>/NNNNN.jpg (N files) and OUT/test/<class>/NNNNN.jpg (N/10, at least
one per class), the layout torchvision's ImageFolder and vdnn's `set = images` read.
Sizes are mixed like ImageNet's: the long side between 280 and 500 pixels, the short
side 0.6 to 1 times that (never under 250), a quarter of them portrait, one in fifty
grayscale; the mean is about 400 x 355. The content is made to cost what a photo costs
to decode and compresses like one at quality 90 (about 100 KB for 400 x 350, ImageNet's
average is about 110 KB): a smooth colour gradient, shapes with soft edges, and
texture in brightness and colour whose amplitude falls with spatial frequency as a
photo's does. File names count across classes (file i is in class i mod CLASSES, whose
hue it leans to). Every file is a function of (SEED, split, index) alone, so the folder
is the same whatever the number of processes that wrote it. 2,000 files take about
40 s on 2 cores.
Usage: make_photos.py OUT N CLASSES [--seed S] [--jobs J]
"""
import argparse
import os
import sys
from multiprocessing import Pool

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

QUALITY = 90


def photo_size(rng):
    """(width, height) drawn like ImageNet's mix of landscape and portrait photos."""
    long_side = int(rng.triangular(280, 480, 500))
    short_side = max(250, int(long_side * rng.uniform(0.6, 1.0)))
    return (short_side, long_side) if rng.random() < 0.25 else (long_side, short_side)


def enlarge(a, w, h, box=None):
    """A float32 (h', w') array enlarged to (h, w), bicubic; box picks its part to enlarge."""
    return np.asarray(Image.fromarray(a, "F").resize((w, h), Image.BICUBIC, box=box))


def octaves(rng, w, h, count):
    """Noise with a falling spectrum like a photo's: white noise plus count - 1 octaves of
    coarser noise, each of twice the cell and 2^-0.3 times the amplitude of the last, so
    the amplitude falls as about 1/f^0.7 of the spatial frequency f (a photo's as about
    1/f; the flatter fall stands in for the fine detail of its edges); standard
    deviation 1."""
    out = rng.standard_normal((h, w), dtype=np.float32)
    for k in range(1, count):
        cell = 2 ** k
        grid = rng.standard_normal((h // cell + 2, w // cell + 2), dtype=np.float32)
        out += enlarge(grid * cell ** -0.3, w, h, (1, 1, 1 + w / cell, 1 + h / cell))
    return out * (1 / out.std())


def shapes(rng, w, h, tint):
    """A few soft-edged ellipses and polygons on a tinted ground: a photo's objects."""
    layer = Image.new("RGB", (w, h), tuple(int(c) for c in tint))
    draw = ImageDraw.Draw(layer)
    for _ in range(rng.integers(3, 8)):
        colour = tuple(int(c) for c in rng.integers(0, 256, 3))
        x0, y0 = rng.integers(-w // 4, w), rng.integers(-h // 4, h)
        x1, y1 = x0 + rng.integers(w // 8, w // 2), y0 + rng.integers(h // 8, h // 2)
        if rng.random() < 0.5:
            draw.ellipse((x0, y0, x1, y1), fill=colour)
        else:
            pts = [(int(rng.integers(x0, x1)), int(rng.integers(y0, y1))) for _ in range(rng.integers(3, 6))]
            draw.polygon(pts, fill=colour)
    return layer.filter(ImageFilter.BoxBlur(1))


def make_photo(seed, split, index, label, classes):
    rng = np.random.default_rng([seed, split, index])
    w, h = photo_size(rng)
    # a class leans to its own hue, so a net fed these files has something to learn
    hue = 2 * np.pi * label / classes
    tint = 128 + 60 * np.array([np.cos(hue), np.cos(hue - 2.1), np.cos(hue + 2.1)])
    gradient = Image.fromarray(rng.integers(0, 256, (3, 4, 3), dtype=np.uint8)).resize((w, h), Image.BICUBIC)
    img = np.asarray(Image.blend(shapes(rng, w, h, tint), gradient, 0.5), dtype=np.float32)
    # texture in brightness at full resolution, in colour at half (as JPEG keeps colour);
    # how busy a photo is varies, the mean gives about 100 KB at 400 x 350
    img += rng.uniform(20, 50) * octaves(rng, w, h, 7)[:, :, None]
    colour = rng.uniform(10, 30)
    for ch in range(3):
        img[:, :, ch] += enlarge(colour * octaves(rng, w // 2, h // 2, 5), w, h)
    out = Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))
    if rng.random() < 0.02:
        out = out.convert("L")
    return out


def write_one(job):
    out, seed, split_name, split, index, label, classes = job
    path = os.path.join(out, split_name, f"class{label:03d}", f"{index:05d}.jpg")
    make_photo(seed, split, index, label, classes).save(path, quality=QUALITY)
    return os.path.getsize(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("n", type=int)
    ap.add_argument("classes", type=int)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    a = ap.parse_args()
    if a.n < 1 or a.classes < 1 or a.classes > a.n:
        sys.exit("make_photos.py: need N >= CLASSES >= 1")
    jobs = []
    for split, (name, count) in enumerate((("train", a.n), ("test", max(a.classes, a.n // 10)))):
        for label in range(a.classes):
            os.makedirs(os.path.join(a.out, name, f"class{label:03d}"), exist_ok=True)
        jobs += [(a.out, a.seed, name, split, i, i % a.classes, a.classes) for i in range(count)]
    with Pool(a.jobs) as pool:
        sizes = pool.map(write_one, jobs, chunksize=16)
    print(f"{len(sizes)} photos in {a.out}: {sum(sizes) / len(sizes) / 1e3:.0f} KB mean, "
          f"{sum(sizes) / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
