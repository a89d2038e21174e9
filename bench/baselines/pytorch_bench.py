#!/usr/bin/env python3
"""Times the zoo nets in PyTorch exactly as `kiln bench` does, for side-by-side ratios.

Synthetic input made once; `warmup` untimed iterations; then `iters` timed iterations of forward
(torch.no_grad, eval mode) or forward+backward (train mode, backward seeded with a fixed random
output gradient, no weight update). Prints the same columns as `kiln bench`.

    tools/install-deps.sh --baseline     # Debian's python3-torch 1.13 + OpenBLAS
    /usr/bin/python3 bench/baselines/pytorch_bench.py --model mnist-cnn --batch 16,64 --threads 2
    # PyTorch at its best here: channels-last and glibc malloc told not to unmap
    GLIBC_TUNABLES=glibc.malloc.mmap_threshold=4294967295:glibc.malloc.trim_threshold=4294967295 \
        python3 bench/baselines/pytorch_bench.py --channels-last ...
"""
import argparse
import statistics
import time

import torch
import torch.nn as nn


def mnist_cnn():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Dropout(0.25), nn.Flatten(), nn.Linear(64 * 12 * 12, 128), nn.ReLU(), nn.Dropout(0.5),
        nn.Linear(128, 10))


NETS = {"mnist-cnn": (mnist_cnn, (1, 28, 28))}


def run(model, batch, train, iters, warmup, channels_last):
    build, shape = NETS[model]
    torch.manual_seed(0)
    net = build()
    x = torch.randn(batch, *shape)
    if channels_last:
        net = net.to(memory_format=torch.channels_last)
        x = x.to(memory_format=torch.channels_last)
    net.train(train)
    grad_out = None

    def step():
        nonlocal grad_out
        if train:
            y = net(x)
            if grad_out is None:
                grad_out = torch.randn_like(y)
            y.backward(grad_out)
            net.zero_grad(set_to_none=True)
        else:
            with torch.no_grad():
                net(x)

    for _ in range(warmup):
        step()
    ms = []
    for _ in range(iters):
        t0 = time.perf_counter()
        step()
        ms.append((time.perf_counter() - t0) * 1000)
    med = statistics.median(ms)
    return min(ms), med, max(ms), batch * 1000.0 / med


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="mnist-cnn")
    p.add_argument("--batch", default="64")
    p.add_argument("--mode", default="forward,train")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--channels-last", action="store_true")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    backend = "pytorch-cl" if a.channels_last else "pytorch"
    print(f"{'model':<12} {'device':<6} {'backend':<10} {'batch':>6} {'mode':<8} {'thr':>3} "
          f"{'ms min':>9} {'ms median':>9} {'ms max':>9} {'images/s':>10}")
    for model in a.model.split(","):
        for batch in a.batch.split(","):
            for mode in a.mode.split(","):
                mn, med, mx, ips = run(model, int(batch), mode == "train", a.iters, a.warmup,
                                       a.channels_last)
                print(f"{model:<12} {'cpu':<6} {backend:<10} {int(batch):>6} {mode:<8} {a.threads:>3} "
                      f"{mn:9.2f} {med:9.2f} {mx:9.2f} {ips:10.1f}", flush=True)


if __name__ == "__main__":
    main()
