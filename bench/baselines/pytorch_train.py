#!/usr/bin/env python3
"""Trains mnist-cnn (the Keras example) on Fashion-MNIST in PyTorch the way `kiln train` does,
for the side-by-side training benchmark (bench/train_mnist.sh).

Same recipe: Adam lr 1e-3, batch 128, shuffled each epoch, inputs scaled to [0, 1] and
normalised with mean 0.2860, std 0.3530, cross-entropy, dropout 0.25 / 0.5. The data are read
once into memory from the IDX files (as kiln's loader does); images/s counts the training steps
only (forward, backward, update), measured per epoch. Prints one JSON line per epoch and a final
line with the test accuracy.

    /usr/bin/python3 bench/baselines/pytorch_train.py --data /usr/share/datasets/fashion-mnist \\
        --epochs 2 --threads 2
"""
import argparse
import gzip
import json
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def find(folder, stem):
    for name in (stem + "-ubyte.gz", stem + "-ubyte", stem + ".gz", stem):
        p = os.path.join(folder, name)
        if os.path.exists(p):
            return p
    raise SystemExit(f"pytorch_train: no {stem} in {folder}")


def mnist_cnn():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Dropout(0.25), nn.Flatten(), nn.Linear(64 * 12 * 12, 128), nn.ReLU(), nn.Dropout(0.5),
        nn.Linear(128, 10))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--limit-train", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)

    def load(split):
        x = read_idx(find(a.data, f"{split}-images-idx3"))
        y = read_idx(find(a.data, f"{split}-labels-idx1"))
        x = (torch.from_numpy(x.astype(np.float32) / 255.0) - 0.2860) / 0.3530
        return x.unsqueeze(1).contiguous(), torch.from_numpy(y.astype(np.int64))

    xtr, ytr = load("train")
    xte, yte = load("t10k")
    if a.limit_train > 0:
        xtr, ytr = xtr[:a.limit_train], ytr[:a.limit_train]
    net = mnist_cnn()
    opt = torch.optim.Adam(net.parameters(), lr=a.lr)
    g = torch.Generator().manual_seed(a.seed)
    for epoch in range(a.epochs):
        net.train()
        perm = torch.randperm(len(xtr), generator=g)
        t0 = time.perf_counter()
        seen, loss_sum, correct = 0, 0.0, 0
        for i in range(0, len(xtr), a.batch):
            idx = perm[i:i + a.batch]
            x, y = xtr[idx], ytr[idx]
            opt.zero_grad(set_to_none=True)
            out = net(x)
            loss = F.cross_entropy(out, y)
            loss.backward()
            opt.step()
            seen += len(idx)
            loss_sum += loss.item() * len(idx)
            correct += (out.argmax(1) == y).sum().item()
        secs = time.perf_counter() - t0
        print(json.dumps({"epoch": epoch + 1, "train_loss": loss_sum / seen, "train_accuracy": correct / seen,
                          "images_per_second": seen / secs, "seconds": secs, "threads": torch.get_num_threads()}),
              flush=True)
    net.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(xte), 1000):
            correct += (net(xte[i:i + 1000]).argmax(1) == yte[i:i + 1000]).sum().item()
    print(json.dumps({"test_accuracy": correct / len(xte), "torch": torch.__version__}), flush=True)


if __name__ == "__main__":
    main()
