#!/usr/bin/env python3
"""Times the kiln zoo nets in PyTorch exactly as `kiln bench` does, for side-by-side ratios.

Every zoo net is defined here in plain torch.nn, layer for layer as kiln's nets/ builds it from
the nets' papers (--list prints each parameter count next to the published one). Synthetic input made once; `warmup` untimed iterations; then `iters` timed
iterations of forward (torch.no_grad, eval mode) or forward+backward (train mode, backward seeded
with a fixed random output gradient, no weight update). Prints the same columns as `kiln bench`
and, with --out, writes the same JSON as `kiln bench --out` (`kiln compare`, `kiln plot` read it).

    tools/install-deps.sh --baseline     # the venv's PyTorch 2.x (.venv), Debian's python3-torch 1.13 + OpenBLAS
    .venv/bin/python bench/baselines/pytorch_bench.py --list
    /usr/bin/python3 bench/baselines/pytorch_bench.py --list
    /usr/bin/python3 bench/baselines/pytorch_bench.py --model alexnet,vgg11 --batch 16,64 --threads 2 --out pt.json
    # PyTorch at its best here: channels-last and glibc malloc told not to unmap
    GLIBC_TUNABLES=glibc.malloc.mmap_threshold=4294967295:glibc.malloc.trim_threshold=4294967295 \\
        /usr/bin/python3 bench/baselines/pytorch_bench.py --channels-last ...
    build/tools/kiln bench --model alexnet --vs-pytorch    # every peer (bench/harness/baseline.h), kiln/peer per row
    # on a GPU (tools/gpu-check runs this): cuDNN benchmark mode on, timed between synchronisations
    python3 bench/baselines/pytorch_bench.py --device cuda --model resnet50 --batch 64 --mode train
    python3 bench/baselines/pytorch_bench.py --device cuda --amp float16 ...   # torch.autocast, as kiln --dtype float16
"""
import argparse
import datetime
import json
import os
import socket
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# ---------------------------------------------------------------------------------------------
# The nets. Parameter counts in comments are nets.md's (section) or torchvision's where nets.md
# has none; --list checks them.


def alexnet():
    """AlexNet-OWT as torchvision (nets.md 1.2), dropout before fc6 and fc7 as kiln's zoo."""
    features = nn.Sequential(
        nn.Conv2d(3, 64, 11, 4, 2), nn.ReLU(), nn.MaxPool2d(3, 2),
        nn.Conv2d(64, 192, 5, 1, 2), nn.ReLU(), nn.MaxPool2d(3, 2),
        nn.Conv2d(192, 384, 3, 1, 1), nn.ReLU(),
        nn.Conv2d(384, 256, 3, 1, 1), nn.ReLU(),
        nn.Conv2d(256, 256, 3, 1, 1), nn.ReLU(), nn.MaxPool2d(3, 2))
    classifier = nn.Sequential(
        nn.Dropout(0.5), nn.Linear(256 * 6 * 6, 4096), nn.ReLU(),
        nn.Dropout(0.5), nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 1000))
    return nn.Sequential(features, nn.AdaptiveAvgPool2d(6), nn.Flatten(), classifier)


def overfeat():
    """OverFeat-fast (nets.md 1.3), 231x231, dropout before fc6 and fc7 as kiln's zoo."""
    features = nn.Sequential(
        nn.Conv2d(3, 96, 11, 4), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Conv2d(96, 256, 5), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Conv2d(256, 512, 3, 1, 1), nn.ReLU(),
        nn.Conv2d(512, 1024, 3, 1, 1), nn.ReLU(),
        nn.Conv2d(1024, 1024, 3, 1, 1), nn.ReLU(), nn.MaxPool2d(2, 2))
    classifier = nn.Sequential(
        nn.Dropout(0.5), nn.Linear(1024 * 6 * 6, 3072), nn.ReLU(),
        nn.Dropout(0.5), nn.Linear(3072, 4096), nn.ReLU(), nn.Linear(4096, 1000))
    return nn.Sequential(features, nn.Flatten(), classifier)


VGG_CFG = {
    11: [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    16: [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"],
    19: [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M",
         512, 512, 512, 512, "M"],
}


def vgg(depth):
    """torchvision vgg11/16/19 without batch norm (nets.md 1.4, 3)."""
    layers, c = [], 3
    for v in VGG_CFG[depth]:
        if v == "M":
            layers.append(nn.MaxPool2d(2, 2))
        else:
            layers += [nn.Conv2d(c, v, 3, 1, 1), nn.ReLU()]
            c = v
    classifier = nn.Sequential(
        nn.Linear(512 * 7 * 7, 4096), nn.ReLU(), nn.Dropout(0.5),
        nn.Linear(4096, 4096), nn.ReLU(), nn.Dropout(0.5), nn.Linear(4096, 1000))
    return nn.Sequential(nn.Sequential(*layers), nn.AdaptiveAvgPool2d(7), nn.Flatten(), classifier)


def conv_relu(cin, cout, k, s=1, p=0):
    return nn.Sequential(nn.Conv2d(cin, cout, k, s, p), nn.ReLU())


class InceptionV1(nn.Module):
    """[1x1] | [1x1 -> 3x3] | [1x1 -> 5x5] | [maxpool 3x3 s1 -> 1x1], concatenated."""

    def __init__(self, cin, c1, c3r, c3, c5r, c5, pp):
        super().__init__()
        self.b1 = conv_relu(cin, c1, 1)
        self.b2 = nn.Sequential(conv_relu(cin, c3r, 1), conv_relu(c3r, c3, 3, 1, 1))
        self.b3 = nn.Sequential(conv_relu(cin, c5r, 1), conv_relu(c5r, c5, 5, 1, 2))
        self.b4 = nn.Sequential(nn.MaxPool2d(3, 1, 1), conv_relu(cin, pp, 1))

    def forward(self, x):
        return torch.cat([self.b1(x), self.b2(x), self.b3(x), self.b4(x)], 1)


def googlenet():
    """GoogLeNet v1 as convnet-benchmarks timed it (nets.md 1.5): no LRN, no aux heads, no
    dropout, linear head. 6,998,552 parameters."""
    cfg3 = [(192, 64, 96, 128, 16, 32, 32), (256, 128, 128, 192, 32, 96, 64)]
    cfg4 = [(480, 192, 96, 208, 16, 48, 64), (512, 160, 112, 224, 24, 64, 64),
            (512, 128, 128, 256, 24, 64, 64), (512, 112, 144, 288, 32, 64, 64),
            (528, 256, 160, 320, 32, 128, 128)]
    cfg5 = [(832, 256, 160, 320, 32, 128, 128), (832, 384, 192, 384, 48, 128, 128)]
    return nn.Sequential(
        conv_relu(3, 64, 7, 2, 3), nn.MaxPool2d(3, 2, 1),
        conv_relu(64, 64, 1), conv_relu(64, 192, 3, 1, 1), nn.MaxPool2d(3, 2, 1),
        *[InceptionV1(*c) for c in cfg3], nn.MaxPool2d(3, 2, 1),
        *[InceptionV1(*c) for c in cfg4], nn.MaxPool2d(3, 2, 1),
        *[InceptionV1(*c) for c in cfg5],
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(1024, 1000))


def bconv(cin, cout, k, s=1, p=0):
    """Inception v3's conv: no bias, BatchNorm (eps 1e-3, gamma and beta), ReLU."""
    return nn.Sequential(nn.Conv2d(cin, cout, k, s, p, bias=False), nn.BatchNorm2d(cout, eps=0.001),
                         nn.ReLU())


class Branches(nn.Module):
    """Runs each branch on the input and concatenates on channels (a branch may itself be a
    Branches to split in two, as InceptionE's 1x3 || 3x1)."""

    def __init__(self, *branches):
        super().__init__()
        self.branches = nn.ModuleList(branches)

    def forward(self, x):
        return torch.cat([b(x) for b in self.branches], 1)


class Then(nn.Module):
    def __init__(self, first, split):
        super().__init__()
        self.first, self.split = first, split

    def forward(self, x):
        return self.split(self.first(x))


def inception_a(cin, pool):
    return Branches(bconv(cin, 64, 1),
                    nn.Sequential(bconv(cin, 48, 1), bconv(48, 64, 5, 1, 2)),
                    nn.Sequential(bconv(cin, 64, 1), bconv(64, 96, 3, 1, 1), bconv(96, 96, 3, 1, 1)),
                    nn.Sequential(nn.AvgPool2d(3, 1, 1), bconv(cin, pool, 1)))


def inception_b(cin):
    return Branches(bconv(cin, 384, 3, 2),
                    nn.Sequential(bconv(cin, 64, 1), bconv(64, 96, 3, 1, 1), bconv(96, 96, 3, 2)),
                    nn.MaxPool2d(3, 2))


def inception_c(cin, c7):
    return Branches(bconv(cin, 192, 1),
                    nn.Sequential(bconv(cin, c7, 1), bconv(c7, c7, (1, 7), 1, (0, 3)),
                                  bconv(c7, 192, (7, 1), 1, (3, 0))),
                    nn.Sequential(bconv(cin, c7, 1), bconv(c7, c7, (7, 1), 1, (3, 0)),
                                  bconv(c7, c7, (1, 7), 1, (0, 3)), bconv(c7, c7, (7, 1), 1, (3, 0)),
                                  bconv(c7, 192, (1, 7), 1, (0, 3))),
                    nn.Sequential(nn.AvgPool2d(3, 1, 1), bconv(cin, 192, 1)))


def inception_d(cin):
    return Branches(nn.Sequential(bconv(cin, 192, 1), bconv(192, 320, 3, 2)),
                    nn.Sequential(bconv(cin, 192, 1), bconv(192, 192, (1, 7), 1, (0, 3)),
                                  bconv(192, 192, (7, 1), 1, (3, 0)), bconv(192, 192, 3, 2)),
                    nn.MaxPool2d(3, 2))


def inception_e(cin):
    def split():
        return Branches(bconv(384, 384, (1, 3), 1, (0, 1)), bconv(384, 384, (3, 1), 1, (1, 0)))
    return Branches(bconv(cin, 320, 1),
                    Then(bconv(cin, 384, 1), split()),
                    Then(nn.Sequential(bconv(cin, 448, 1), bconv(448, 384, 3, 1, 1)), split()),
                    nn.Sequential(nn.AvgPool2d(3, 1, 1), bconv(cin, 192, 1)))


def inception3():
    """Inception v3 as torchvision's inception_v3(aux_logits=False) (nets.md 3, 5): 23,834,568."""
    return nn.Sequential(
        bconv(3, 32, 3, 2), bconv(32, 32, 3), bconv(32, 64, 3, 1, 1), nn.MaxPool2d(3, 2),
        bconv(64, 80, 1), bconv(80, 192, 3), nn.MaxPool2d(3, 2),
        inception_a(192, 32), inception_a(256, 64), inception_a(288, 64),
        inception_b(288),
        inception_c(768, 128), inception_c(768, 160), inception_c(768, 160), inception_c(768, 192),
        inception_d(768),
        inception_e(1280), inception_e(2048),
        nn.AdaptiveAvgPool2d(1), nn.Dropout(0.5), nn.Flatten(), nn.Linear(2048, 1000))


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin, planes, stride=1, shortcut=None):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = shortcut

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (x if self.shortcut is None else self.shortcut(x)))


class Bottleneck(nn.Module):
    """torchvision's v1.5 bottleneck: the stride is on the 3x3 conv."""
    expansion = 4

    def __init__(self, cin, planes, stride=1, shortcut=None):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.shortcut = shortcut

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + (x if self.shortcut is None else self.shortcut(x)))


def resnet(depth):
    """torchvision resnet18/50/101 (v1.5; nets.md 4): 11,689,512 / 25,557,032 / 44,549,160."""
    block, counts = {18: (BasicBlock, [2, 2, 2, 2]), 50: (Bottleneck, [3, 4, 6, 3]),
                     101: (Bottleneck, [3, 4, 23, 3])}[depth]
    layers, cin = [], 64
    for i, (planes, n) in enumerate(zip([64, 128, 256, 512], counts)):
        stride = 1 if i == 0 else 2
        out = planes * block.expansion
        shortcut = None
        if stride != 1 or cin != out:
            shortcut = nn.Sequential(nn.Conv2d(cin, out, 1, stride, bias=False), nn.BatchNorm2d(out))
        stage = [block(cin, planes, stride, shortcut)]
        stage += [block(out, planes) for _ in range(n - 1)]
        layers.append(nn.Sequential(*stage))
        cin = out
    return nn.Sequential(
        nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1),
        *layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512 * block.expansion, 1000))


class PadShortcut(nn.Module):
    """Option-A shortcut: stride-2 subsampling and zero channels, half before and half after."""

    def __init__(self, stride, extra):
        super().__init__()
        self.stride, self.extra = stride, extra

    def forward(self, x):
        x = x[:, :, ::self.stride, ::self.stride]
        return F.pad(x, (0, 0, 0, 0, self.extra // 2, self.extra - self.extra // 2))


def resnet56():
    """CIFAR-10 ResNet-56, option-A shortcuts (nets.md 4): 853,018 parameters."""
    layers, cin = [], 16
    for s, planes in enumerate([16, 32, 64]):
        stride = 1 if s == 0 else 2
        shortcut = PadShortcut(stride, planes - cin) if stride != 1 or cin != planes else None
        layers.append(BasicBlock(cin, planes, stride, shortcut))
        layers += [BasicBlock(planes, planes) for _ in range(8)]
        cin = planes
    return nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(), *layers,
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))


def cifar10_cnn():
    """Keras examples/cifar10_cnn.py (nets.md 7.1): 1,250,858 parameters."""
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, 1, 1), nn.ReLU(), nn.Conv2d(32, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Dropout(0.25),
        nn.Conv2d(32, 64, 3, 1, 1), nn.ReLU(), nn.Conv2d(64, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Dropout(0.25), nn.Flatten(),
        nn.Linear(64 * 6 * 6, 512), nn.ReLU(), nn.Dropout(0.5), nn.Linear(512, 10))


def mnist_cnn():
    """Keras examples/mnist_cnn.py (nets.md 7.2): 1,199,882 parameters."""
    return nn.Sequential(
        nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Dropout(0.25), nn.Flatten(), nn.Linear(64 * 12 * 12, 128), nn.ReLU(), nn.Dropout(0.5),
        nn.Linear(128, 10))


def double_conv(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, 1, 1), nn.ReLU(), nn.Conv2d(cout, cout, 3, 1, 1), nn.ReLU())


class UNet(nn.Module):
    """Ronneberger's UNet with same-padded convs (nets.md 6.1): width 64, depth 4, 1 -> 2
    channels, 31,030,658 parameters; skip first in each concatenation, as kiln's."""

    def __init__(self, cin=1, classes=2, width=64, depth=4):
        super().__init__()
        chans = [width * 2 ** i for i in range(depth + 1)]
        self.down = nn.ModuleList()
        c = cin
        for ch in chans[:-1]:
            self.down.append(double_conv(c, ch))
            c = ch
        self.bottom = double_conv(c, chans[-1])
        self.up = nn.ModuleList(nn.ConvTranspose2d(chans[i + 1], chans[i], 2, 2) for i in reversed(range(depth)))
        self.dec = nn.ModuleList(double_conv(2 * chans[i], chans[i]) for i in reversed(range(depth)))
        self.head = nn.Conv2d(width, classes, 1)

    def forward(self, x):
        skips = []
        for d in self.down:
            x = d(x)
            skips.append(x)
            x = F.max_pool2d(x, 2)
        x = self.bottom(x)
        for up, dec, skip in zip(self.up, self.dec, reversed(skips)):
            x = dec(torch.cat([skip, up(x)], 1))
        return self.head(x)


# name: (builder, input C,H,W, expected parameters, where the figure comes from)
def run_rnn(rnn, x):
    """The output sequence of a recurrent layer. Under CPU autocast to float16 (the emulated
    gpu-check's peer) PyTorch's oneDNN LSTM has no float16 kernel: the layer runs in float32, as
    kiln runs recurrent layers on half inputs."""
    if x.device.type == "cpu" and torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.float16:
        with torch.autocast("cpu", enabled=False):
            return rnn(x.float())[0]
    return rnn(x)[0]


class Forecaster(nn.Module):
    """nets/recurrent.cpp's lstm-forecast / gru-forecast: the last step of the layer to Linear."""

    def __init__(self, cell, features=3, hidden=64, outputs=3):
        super().__init__()
        self.rnn = cell(features, hidden, batch_first=True)
        self.fc = nn.Linear(hidden, outputs)

    def forward(self, x):
        return self.fc(run_rnn(self.rnn, x)[:, -1])


class SequenceLayer(nn.Module):
    """One batch-first recurrent layer whose output sequence is the net's output (DeepBench shapes)."""

    def __init__(self, cell, hidden):
        super().__init__()
        self.rnn = cell(hidden, hidden, batch_first=True)

    def forward(self, x):
        return run_rnn(self.rnn, x)


def rnn_params(gates, inp, hidden):
    return gates * hidden * (inp + hidden) + 2 * gates * hidden


NETS = {
    "alexnet": (alexnet, (3, 224, 224), 61100840, "nets.md 1.2"),
    "overfeat": (overfeat, (3, 231, 231), 145920872, "nets.md 1.3"),
    "vgg11": (lambda: vgg(11), (3, 224, 224), 132863336, "nets.md 1.4"),
    "vgg16": (lambda: vgg(16), (3, 224, 224), 138357544, "nets.md 3"),
    "vgg19": (lambda: vgg(19), (3, 224, 224), 143667240, "nets.md 3"),
    "googlenet": (googlenet, (3, 224, 224), 6998552, "nets.md 1.5"),
    "inception3": (inception3, (3, 299, 299), 23834568, "nets.md 3"),
    "resnet18": (lambda: resnet(18), (3, 224, 224), 11689512, "torchvision"),
    "resnet50": (lambda: resnet(50), (3, 224, 224), 25557032, "nets.md 4"),
    "resnet101": (lambda: resnet(101), (3, 224, 224), 44549160, "torchvision"),
    "resnet56": (resnet56, (3, 32, 32), 853018, "nets.md 4"),
    "cifar10-cnn": (cifar10_cnn, (3, 32, 32), 1250858, "nets.md 7.1"),
    "mnist-cnn": (mnist_cnn, (1, 28, 28), 1199882, "nets.md 7.2"),
    "unet": (UNet, (1, 128, 128), 31030658, "nets.md 6.1"),
    "lstm-forecast": (lambda: Forecaster(nn.LSTM), (6, 3), rnn_params(4, 3, 64) + 195, "DEEP"),
    "gru-forecast": (lambda: Forecaster(nn.GRU), (6, 3), rnn_params(3, 3, 64) + 195, "DEEP"),
    "lstm-h1024-t25": (lambda: SequenceLayer(nn.LSTM, 1024), (25, 1024), rnn_params(4, 1024, 1024), "DeepBench"),
    "lstm-h1536-t50": (lambda: SequenceLayer(nn.LSTM, 1536), (50, 1536), rnn_params(4, 1536, 1536), "DeepBench"),
    "gru-h512-t1500": (lambda: SequenceLayer(nn.GRU, 512), (1500, 512), rnn_params(3, 512, 512), "DeepBench"),
    "gru-h2816-t375": (lambda: SequenceLayer(nn.GRU, 2816), (375, 2816), rnn_params(3, 2816, 2816), "DeepBench"),
}


def count_params(net):
    return sum(p.numel() for p in net.parameters() if p.requires_grad)


def count_macs(net, shape):
    """Conv, linear and recurrent MACs of one sample, as kiln's bench/harness/flops.cpp counts them."""
    total = [0]

    def hook(m, inp, out):
        if isinstance(m, nn.RNNBase):  # every step of every layer: its weight matrices once each
            steps = inp[0].shape[0] * inp[0].shape[1]
            total[0] += steps * sum(w.numel() for n, w in m.named_parameters() if n.startswith("weight_"))
        elif isinstance(m, nn.Conv2d):
            total[0] += out.numel() * m.weight[0].numel()
        elif isinstance(m, nn.ConvTranspose2d):
            total[0] += inp[0].numel() * m.weight[0].numel()
        elif isinstance(m, nn.Linear):
            total[0] += out.numel() * m.in_features

    handles = [m.register_forward_hook(hook) for m in net.modules()
               if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d, nn.Linear, nn.RNNBase))]
    net.eval()
    with torch.no_grad():
        net(torch.zeros(1, *shape))
    for h in handles:
        h.remove()
    return total[0]


# ---------------------------------------------------------------------------------------------
# Timing, as bench/harness/convnet.cpp.

def run(model, batch, train, iters, warmup, channels_last, device="cpu", amp=""):
    build, shape, _, _ = NETS[model]
    torch.manual_seed(0)
    net = build()
    macs = count_macs(net, shape)
    x = torch.randn(batch, *shape)
    cuda = device.startswith("cuda")
    if cuda:
        net, x = net.to(device), x.to(device)
        torch.cuda.reset_peak_memory_stats(device)
    autocast_dtype = {"float16": torch.float16, "bfloat16": torch.bfloat16}.get(amp)
    if channels_last and x.dim() == 4:  # a memory format of images; sequence nets have none
        net = net.to(memory_format=torch.channels_last)
        x = x.to(memory_format=torch.channels_last)
    net.train(train)
    grad_out = None

    def forward():
        if autocast_dtype is None:
            return net(x)
        with torch.autocast(device_type="cuda" if cuda else "cpu", dtype=autocast_dtype):
            return net(x)

    def step():
        nonlocal grad_out
        if train:
            y = forward()
            if grad_out is None:
                grad_out = torch.randn_like(y)
            y.backward(grad_out)
            net.zero_grad(set_to_none=True)
        else:
            with torch.no_grad():
                forward()

    def sync():
        if cuda:
            torch.cuda.synchronize(device)

    for _ in range(warmup):
        step()
    sync()
    ms = []
    loop0 = time.perf_counter()
    for _ in range(iters):
        t0 = time.perf_counter()
        step()
        sync()
        ms.append((time.perf_counter() - t0) * 1000)
    wall = time.perf_counter() - loop0
    med = statistics.median(ms)
    gflop = 2.0 * macs * batch * (3.0 if train else 1.0) * 1e-9
    return {
        "ms": ms, "ms_min": min(ms), "ms_median": med, "ms_max": max(ms),
        "ms_mean": statistics.fmean(ms), "images_per_s": batch * 1000.0 / med, "wall_s": wall,
        "peak_bytes": torch.cuda.max_memory_allocated(device) if cuda else None, "parameters": count_params(net), "gflop_per_iter": gflop,
        "gflops": gflop / (med * 1e-3),
    }


def cpu_model():
    fallback = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key, value = key.strip(), value.strip()
                if key == "model name" and value:
                    return value
                if key in ("cpu", "Processor") and not fallback:
                    fallback = value
    except OSError:
        pass
    return fallback or os.uname().machine


def list_nets():
    ok = True
    print(f"{'model':<12} {'input':<12} {'parameters':>12} {'expected':>12} {'source':<12} check")
    for name, (build, shape, expected, source) in NETS.items():
        n = count_params(build())
        good = n == expected
        ok &= good
        dims = "x".join(map(str, shape))
        print(f"{name:<12} {dims:<12} {n:>12,} {expected:>12,} {source:<12} {'ok' if good else 'MISMATCH'}")
    return 0 if ok else 1


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="mnist-cnn", help="comma-separated names (see --list)")
    p.add_argument("--batch", default="64", help="comma-separated batch sizes")
    p.add_argument("--mode", default="forward,train")
    p.add_argument("--runs", default="",
                   help="exact list model:batch:mode,... (overrides --model/--batch/--mode; kiln uses it)")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (always explicit)")
    p.add_argument("--channels-last", action="store_true", help="NHWC memory format for net and input")
    p.add_argument("--backend-name", default="",
                   help="backend field of the results (default pytorch, or pytorch-cl with --channels-last)")
    p.add_argument("--device", default="cpu", help="cpu or cuda[:N] (cuDNN benchmark mode on, as kiln's)")
    p.add_argument("--tf32", action="store_true",
                   help="on cuda: TF32 for convolutions and matrix products (kiln: KILN_ALLOW_TF32=1)")
    p.add_argument("--amp", default="", choices=["", "float16", "bfloat16"],
                   help="mixed precision by torch.autocast (kiln: --dtype float16|bfloat16)")
    p.add_argument("--out", default="", help="write the JSON of kiln bench --out")
    p.add_argument("--list", action="store_true", help="print every net's parameter count and check it")
    a = p.parse_args()
    if a.list:
        return list_nets()

    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    if a.device.startswith("cuda"):
        if not torch.cuda.is_available():
            sys.exit("pytorch_bench: --device cuda but torch sees no CUDA device")
        torch.backends.cudnn.benchmark = True
        # float32 results, as kiln's default; --tf32 as kiln's KILN_ALLOW_TF32=1 (convolutions and
        # matrix products on the tensor cores' TF32)
        torch.backends.cuda.matmul.allow_tf32 = a.tf32
        torch.backends.cudnn.allow_tf32 = a.tf32
    backend = a.backend_name or ("pytorch-cl" if a.channels_last else "pytorch")
    dtype = a.amp or ("tf32" if a.tf32 else "float32")
    if a.runs:
        runs = []
        for item in a.runs.split(","):
            model, batch, mode = item.split(":")
            runs.append((model, int(batch), mode))
    else:
        runs = [(m, int(b), mode) for m in a.model.split(",") for b in a.batch.split(",")
                for mode in a.mode.split(",")]
    for model, _, mode in runs:
        if model not in NETS:
            sys.exit(f"pytorch_bench: unknown model '{model}' (known: {', '.join(NETS)})")
        if mode not in ("forward", "train"):
            sys.exit(f"pytorch_bench: mode is forward or train, got '{mode}'")

    machine = {
        "framework": "pytorch", "version": torch.__version__, "hostname": socket.gethostname(),
        "cpu": cpu_model(), "cores": os.cpu_count(), "threads": torch.get_num_threads(),
        "gpu": torch.cuda.get_device_name(a.device) if a.device.startswith("cuda") else "",
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    print(f"{'model':<12} {'device':<6} {'backend':<10} {'batch':>6} {'mode':<8} {'thr':>3} "
          f"{'ms min':>9} {'ms median':>9} {'ms max':>9} {'images/s':>10} {'GFLOP/s':>8}", flush=True)
    results = []
    for model, batch, mode in runs:
        r = run(model, batch, mode == "train", a.iters, a.warmup, a.channels_last, a.device, a.amp)
        print(f"{model:<12} {a.device:<6} {backend:<10} {batch:>6} {mode:<8} {a.threads:>3} "
              f"{r['ms_min']:9.2f} {r['ms_median']:9.2f} {r['ms_max']:9.2f} {r['images_per_s']:10.1f} "
              f"{r['gflops']:8.1f}", flush=True)
        results.append({"model": model, "device": a.device, "backend": backend, "dtype": dtype,
                        "batch": batch, "mode": mode, "iters": a.iters, "warmup": a.warmup,
                        "threads": a.threads, "loss": "random_grad", **r})
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"format": "kiln-bench-results/1", "machine": machine, "runs": results}, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
