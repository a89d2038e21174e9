#!/usr/bin/env python3
"""Per-layer forward and backward times of a zoo net in PyTorch, the peer of `kiln bench --layers`.

The nets are pytorch_bench.py's (layer for layer as kiln's zoo, the same module paths:
features.0, layer1.0.conv1, ...). Every leaf module gets hooks that time its forward (pre- to
post-forward) and its backward (full backward pre-hook to hook); the medians over the timed
iterations are printed per layer, then the total per iteration. The hooks add a few microseconds
per layer and make PyTorch run each module's backward as its own node: totals run a little above
pytorch_bench.py's, which is the figure to quote; this script says where the time goes.

    .venv/bin/python bench/baselines/pytorch_layers.py --model vgg11 --batch 16 --mode train --channels-last
    build/tools/kiln bench --model vgg11 --batch 16 --mode train --layers      # the same rows in kiln
"""
import argparse
import importlib.util
import os
import statistics
import sys
import time

import torch


def load_bench():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pytorch_bench.py")
    spec = importlib.util.spec_from_file_location("pytorch_bench", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--mode", default="train", choices=["forward", "train"])
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--channels-last", action="store_true")
    a = p.parse_args()
    if a.iters < 1 or a.warmup < 0 or a.batch < 1 or a.threads < 1:
        sys.exit("pytorch_layers.py: --iters, --batch and --threads must be at least 1, --warmup at least 0")
    bench = load_bench()
    if a.model not in bench.NETS:
        sys.exit(f"pytorch_layers.py: unknown model '{a.model}' (known: {', '.join(bench.NETS)})")
    torch.set_num_threads(a.threads)
    build, shape, _, _ = bench.NETS[a.model]
    net = build()
    train = a.mode == "train"
    net.train(train)
    x = torch.randn(a.batch, *shape)
    if a.channels_last:
        net = net.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)

    fwd, bwd, start = {}, {}, {}
    leaves = [(n, m) for n, m in net.named_modules() if n and not list(m.children())]
    for name, m in leaves:
        fwd[name], bwd[name] = [], []

        def pre(mod, inp, name=name):
            start[("f", name)] = time.perf_counter()

        def post(mod, inp, out, name=name):
            fwd[name].append(time.perf_counter() - start[("f", name)])

        m.register_forward_pre_hook(pre)
        m.register_forward_hook(post)
        if train:
            def bpre(mod, gout, name=name):
                start[("b", name)] = time.perf_counter()

            def bpost(mod, gin, gout, name=name):
                if ("b", name) in start:
                    bwd[name].append(time.perf_counter() - start.pop(("b", name)))

            m.register_full_backward_pre_hook(bpre)
            m.register_full_backward_hook(bpost)

    totals = []
    for it in range(a.warmup + a.iters):
        if it == a.warmup:
            for name, _ in leaves:
                fwd[name].clear()
                bwd[name].clear()
        t0 = time.perf_counter()
        if train:
            xi = x.detach().requires_grad_(True)  # so the first layer's backward hooks fire
            y = net(xi)
            y.backward(torch.ones_like(y))
            net.zero_grad(set_to_none=True)
        else:
            with torch.no_grad():
                net(x)
        if it >= a.warmup:
            totals.append(time.perf_counter() - t0)

    med = lambda v: statistics.median(v) * 1e3 if v else 0.0  # noqa: E731
    print(f"pytorch_layers: {a.model} batch {a.batch} {a.mode} threads {a.threads} "
          f"{'channels-last' if a.channels_last else 'nchw'} torch {torch.__version__}, median of {a.iters}")
    print(f"  {'layer':<36} {'kind':<44} {'fwd ms':>9} {'bwd ms':>9} {'total ms':>9}")
    for name, m in leaves:
        f, b = med(fwd[name]), med(bwd[name])
        kind = repr(m).replace("\n", " ")[:44]
        print(f"  {name:<36} {kind:<44} {f:9.3f} {b:9.3f} {f + b:9.3f}")
    print(f"  {'(total per iteration)':<36} {'':<44} {'':>9} {'':>9} {med(totals):9.3f}")


if __name__ == "__main__":
    main()
