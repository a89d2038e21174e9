#!/usr/bin/env python3
"""Writes an ImageNet-like image tree of JPEGs for the loader benchmarks (bench/loader_share.sh).

DIR/train/cNN/*.jpg and DIR/val/cNN/*.jpg, the layout `kiln train --data DIR` reads as an image
folder (io/data/datasets.cpp: name "imagenet", random-resized-crop 224 + flip + normalize) and
torchvision's ImageFolder reads as well. Images are ImageNet's typical sizes (500x375, 375x500,
500x333, 500x400, 400x500 ...), quality 90, with smooth colour fields, shapes and grain, so a
file is 40-120 kB and decoding costs what a photo's does (a flat image would decode far faster).
The same seed gives the same files.

    .venv/bin/python bench/make_jpeg_folder.py /tmp/kiln-jpeg --classes 10 --per-class 128
"""
import argparse
import os
import sys

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

SIZES = [(500, 375), (375, 500), (500, 333), (500, 400), (400, 500), (500, 500), (333, 500), (480, 360)]


def make_image(rng, w, h, hue):
    # A low-frequency colour field (a 6x5 grid of random colours, upscaled bicubically) tinted by
    # the class, then shapes, then blur and grain: the mix of smooth areas and edges of a photo.
    grid = rng.integers(0, 256, size=(5, 6, 3), dtype=np.uint8)
    grid = (0.6 * grid + 0.4 * np.array(hue, dtype=np.float64)).astype(np.uint8)
    img = Image.fromarray(grid, "RGB").resize((w, h), Image.BICUBIC)
    draw = ImageDraw.Draw(img)
    for _ in range(int(rng.integers(6, 16))):
        x0, y0 = int(rng.integers(-w // 4, w)), int(rng.integers(-h // 4, h))
        x1, y1 = x0 + int(rng.integers(20, w // 2)), y0 + int(rng.integers(20, h // 2))
        colour = tuple(int(c) for c in rng.integers(0, 256, size=3))
        if rng.random() < 0.5:
            draw.ellipse([x0, y0, x1, y1], fill=colour)
        else:
            draw.rectangle([x0, y0, x1, y1], fill=colour)
    for _ in range(int(rng.integers(3, 8))):
        pts = [(int(rng.integers(0, w)), int(rng.integers(0, h))) for _ in range(2)]
        draw.line(pts, fill=tuple(int(c) for c in rng.integers(0, 256, size=3)), width=int(rng.integers(1, 6)))
    img = img.filter(ImageFilter.GaussianBlur(radius=float(rng.uniform(0.5, 1.5))))
    a = np.asarray(img, dtype=np.int16) + rng.normal(0, 9, size=(h, w, 3)).astype(np.int16)
    return Image.fromarray(np.clip(a, 0, 255).astype(np.uint8), "RGB")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("dir", nargs="?", default="/tmp/kiln-jpeg", help="output directory (default /tmp/kiln-jpeg)")
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--per-class", type=int, default=128, help="training images per class")
    p.add_argument("--val-per-class", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quality", type=int, default=90)
    a = p.parse_args()
    if a.classes < 1 or a.per_class < 1 or a.val_per_class < 1:
        sys.exit("make_jpeg_folder.py: --classes, --per-class and --val-per-class must be at least 1")
    if not 1 <= a.quality <= 100:
        sys.exit("make_jpeg_folder.py: --quality must be in [1, 100]")
    rng = np.random.default_rng(a.seed)
    total = 0
    for split, n in (("train", a.per_class), ("val", a.val_per_class)):
        for c in range(a.classes):
            d = os.path.join(a.dir, split, f"c{c:02d}")
            os.makedirs(d, exist_ok=True)
            hue = np.random.default_rng(a.seed * 1000 + c).integers(0, 256, size=3)
            for i in range(n):
                w, h = SIZES[int(rng.integers(0, len(SIZES)))]
                path = os.path.join(d, f"{i:05d}.jpg")
                make_image(rng, w, h, hue).save(path, "JPEG", quality=a.quality)
                total += os.path.getsize(path)
    count = a.classes * (a.per_class + a.val_per_class)
    print(f"{a.dir}: {count} JPEGs in {a.classes} classes, {total / count / 1024:.0f} kB each on average")


if __name__ == "__main__":
    main()
