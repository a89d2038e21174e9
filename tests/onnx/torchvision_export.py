"""Exports the torchvision nets of kiln's zoo with PyTorch's ONNX exporters for
tests/onnx/test_onnx_torchvision.cpp, and runs each file in onnxruntime.

  torchvision_export.py OUT_DIR [NET ...]
      for each net and exporter (legacy: the TorchScript one, dynamo=False; dynamo: torch.export's)
      writes OUT_DIR/<net>_<exporter>.onnx, the input (<net>.in.bin), PyTorch's output
      (<net>.torch.bin) and onnxruntime's (<net>_<exporter>.ort.bin), raw float32, and a line of
      OUT_DIR/manifest.tsv: net, exporter, opset, "ok" or "export failed: <why>", input shape,
      output shape, seconds.

The nets have random weights (seeded) and batch-norm statistics away from 0 / 1, in eval mode, at
small inputs (where the adaptive pools still divide evenly) so that the whole set takes a few
minutes; the batch dim is exported free ("N"). Exporter defaults (opset, constant folding) are
left as a user gets them.
"""
import os
import sys
import time
import warnings

import numpy as np

# kiln zoo name -> (torchvision constructor, kwargs, input [N, C, H, W]).
NETS = {
    "alexnet": ("alexnet", {}, [2, 3, 224, 224]),
    "vgg11": ("vgg11", {}, [1, 3, 224, 224]),
    "vgg16": ("vgg16", {}, [1, 3, 224, 224]),
    "vgg19": ("vgg19", {}, [1, 3, 224, 224]),
    "resnet18": ("resnet18", {}, [2, 3, 64, 64]),
    "resnet50": ("resnet50", {}, [2, 3, 64, 64]),
    "resnet101": ("resnet101", {}, [1, 3, 64, 64]),
    "inception3": ("inception_v3", {"aux_logits": False, "init_weights": True, "transform_input": False},
                   [1, 3, 75, 75]),
}


def build(name):
    import torch
    import torchvision

    ctor, kwargs, shape = NETS[name]
    torch.manual_seed(0)
    net = getattr(torchvision.models, ctor)(weights=None, **kwargs)
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.3, 0.3)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.3, 0.8)
                m.bias.uniform_(-0.2, 0.2)
    net.eval()
    n = int(np.prod(shape))
    x = torch.from_numpy((np.sin(0.013 * np.arange(n) + 0.5) * 1.5).astype(np.float32).reshape(shape))
    return net, x


def export(net, x, path, exporter):
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # The batch dim left free, as a user exports for inference at any batch.
        if exporter == "legacy":
            torch.onnx.export(net, (x,), path, dynamo=False, input_names=["input"], output_names=["output"],
                              dynamic_axes={"input": {0: "N"}, "output": {0: "N"}})
        else:
            torch.onnx.export(net, (x,), path, dynamo=True, input_names=["input"], output_names=["output"],
                              dynamic_shapes=({0: torch.export.Dim("N")},), external_data=False)


def run_ort(path, x):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    opts.log_severity_level = 4
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x})[0]


def main(out_dir, names):
    import onnx
    import torch

    torch.set_num_threads(2)
    os.makedirs(out_dir, exist_ok=True)
    lines = []
    for name in names:
        net, x = build(name)
        with torch.no_grad():
            y = net(x).numpy()
        xn = x.numpy()
        xn.astype("<f4").tofile(os.path.join(out_dir, f"{name}.in.bin"))
        y.astype("<f4").tofile(os.path.join(out_dir, f"{name}.torch.bin"))
        for exporter in ("legacy", "dynamo"):
            t0 = time.time()
            path = os.path.join(out_dir, f"{name}_{exporter}.onnx")
            opset, status = 0, "ok"
            try:
                export(net, x, path, exporter)
                m = onnx.load(path)
                opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), 0)
                run_ort(path, xn).astype("<f4").tofile(os.path.join(out_dir, f"{name}_{exporter}.ort.bin"))
            except Exception as e:  # noqa: BLE001 - reported per file, the C++ test decides
                status = "export failed: " + " ".join(str(e).split())[:200]
            lines.append("\t".join([name, exporter, str(opset), status, ",".join(map(str, x.shape)),
                                    ",".join(map(str, y.shape)), f"{time.time() - t0:.1f}"]))
            print(lines[-1], flush=True)
    with open(os.path.join(out_dir, "manifest.tsv"), "w") as f:
        f.write(f"# torch {torch.__version__}, onnx {onnx.__version__}\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: torchvision_export.py OUT_DIR [NET ...]")
    main(sys.argv[1], sys.argv[2:] or list(NETS))
