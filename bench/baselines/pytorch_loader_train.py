#!/usr/bin/env python3
"""Training steps of a zoo net in PyTorch fed by a DataLoader, the peer of `kiln train --data` in
bench/loader_share.py. Prints one JSON line: the steady images/s (steps after --skip), from the
end of one step to the end of the next, so waiting for a batch counts as kiln's train.csv counts it.

Recipe as kiln's for an image tree (io/data/datasets.cpp, name "imagenet"): RandomResizedCrop(224),
RandomHorizontalFlip, ToTensor, Normalize(ImageNet mean/std); torchvision's ImageFolder; SGD lr
0.01 momentum 0.9; cross-entropy; channels-last; the net of pytorch_bench.py's NETS with its last
Linear sized to the data's classes. `synthetic:CxHxW:CLASSES:N` gives uniform [0, 1) float
samples made in the workers, as kiln's SyntheticDataset does. DataLoader workers are processes
(num_workers = kiln's --workers, two batches each in flight, persistent).

    .venv/bin/python bench/baselines/pytorch_loader_train.py --model alexnet --batch 64 \\
        --data /tmp/kiln-jpeg --workers 2 --steps 12 --skip 4
"""
import argparse
import importlib.util
import json
import os
import sys
import time

import torch
import torch.nn as nn


def load_bench():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pytorch_bench.py")
    spec = importlib.util.spec_from_file_location("pytorch_bench", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Synthetic(torch.utils.data.Dataset):
    def __init__(self, shape, classes, n):
        self.shape, self.classes, self.n = shape, classes, n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.rand(self.shape, generator=g), i % self.classes


def open_data(spec):
    if spec.startswith("synthetic:"):
        parts = spec.split(":")
        if len(parts) != 4:
            sys.exit(f"pytorch_loader_train.py: bad synthetic spec '{spec}' (synthetic:CxHxW:CLASSES:N)")
        shape = tuple(int(v) for v in parts[1].split("x"))
        return Synthetic(shape, int(parts[2]), int(parts[3])), int(parts[2])
    import torchvision.datasets as datasets
    import torchvision.transforms as T
    train = os.path.join(spec, "train")
    if not os.path.isdir(train):
        sys.exit(f"pytorch_loader_train.py: {spec} has no train/ folder (bench/make_jpeg_folder.py writes one)")
    tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    ds = datasets.ImageFolder(train, tf)
    return ds, len(ds.classes)


def resize_head(net, classes):
    last = None
    for name, m in net.named_modules():
        if isinstance(m, nn.Linear):
            last = name
    if last is None:
        return net
    parent_name, _, attr = last.rpartition(".")
    parent = net.get_submodule(parent_name) if parent_name else net
    old = getattr(parent, attr)
    setattr(parent, attr, nn.Linear(old.in_features, classes))
    return net


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="alexnet")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--data", required=True, help="image tree (DIR/train/CLASS/*.jpg) or synthetic:CxHxW:CLASSES:N")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--threads", type=int, default=0, help="intra-op threads (0: PyTorch's default)")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--skip", type=int, default=4)
    a = p.parse_args()
    if a.batch < 1 or a.workers < 0 or a.threads < 0 or a.skip < 0 or a.steps <= a.skip:
        sys.exit("pytorch_loader_train.py: --batch >= 1, --workers/--threads/--skip >= 0, --steps > --skip")
    bench = load_bench()
    if a.model not in bench.NETS:
        sys.exit(f"pytorch_loader_train.py: unknown model '{a.model}' (known: {', '.join(bench.NETS)})")
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    ds, classes = open_data(a.data)
    if len(ds) < a.batch * a.steps:
        sys.exit(f"pytorch_loader_train.py: {len(ds)} samples are fewer than {a.steps} steps of {a.batch}")
    loader = torch.utils.data.DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=a.workers,
                                         persistent_workers=a.workers > 0)
    net = resize_head(bench.NETS[a.model][0](), classes).to(memory_format=torch.channels_last)
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    times = []
    t = time.perf_counter()
    for step, (x, y) in enumerate(loader):
        if step >= a.steps:
            break
        x = x.contiguous(memory_format=torch.channels_last)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        now = time.perf_counter()
        times.append((x.shape[0], now - t))
        t = now
    steady = times[a.skip:]
    ips = sum(n for n, _ in steady) / sum(s for _, s in steady)
    print(json.dumps({"framework": "pytorch", "model": a.model, "batch": a.batch, "data": a.data,
                      "workers": a.workers, "threads": torch.get_num_threads(), "steps": len(times),
                      "skip": a.skip, "images_per_s": round(ips, 2), "loss": round(loss.item(), 4)}))


if __name__ == "__main__":
    main()
