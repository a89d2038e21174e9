"""Runs an ONNX model in onnxruntime for tests/e2e/test_onnx.cpp.

  onnx_run.py check MODEL.onnx INPUT.bin OUTPUT.bin N C H W
      onnx.checker.check_model, then onnxruntime on the float32 input (raw little-endian, NCHW);
      writes the first output as raw float32 and prints its shape.
  onnx_run.py torch OUT.onnx INPUT.bin OUTPUT.bin
      (run with a Python that has torch) exports a small CNN with torch.onnx.export in eval mode
      and writes its output on a fixed input [2, 3, 16, 16] beside it.
"""
import sys

import numpy as np


def check(model, inp, out, shape):
    import onnx
    import onnxruntime as ort

    m = onnx.load(model)
    onnx.checker.check_model(m, full_check=True)
    x = np.fromfile(inp, dtype="<f4").reshape(shape)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    y = sess.run(None, {sess.get_inputs()[0].name: x})[0]
    y.astype("<f4").tofile(out)
    print("onnxruntime", ort.__version__, "output", list(y.shape))


def torch_cnn(model, inp, out):
    import torch
    import torch.nn as nn

    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU(), nn.AvgPool2d(2),
        nn.Flatten(), nn.Linear(16 * 2 * 2, 10), nn.Softmax(dim=1))
    with torch.no_grad():  # running stats away from 0 / 1 so BatchNormalization matters
        net[1].running_mean.uniform_(-0.5, 0.5)
        net[1].running_var.uniform_(0.5, 2.0)
    net.eval()
    x = torch.linspace(-1, 1, 2 * 3 * 16 * 16).reshape(2, 3, 16, 16)
    torch.onnx.export(net, x, model, opset_version=13, input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "N"}, "output": {0: "N"}})
    x.numpy().astype("<f4").tofile(inp)
    with torch.no_grad():
        net(x).numpy().astype("<f4").tofile(out)
    print("torch", torch.__version__)


if __name__ == "__main__":
    if sys.argv[1] == "check":
        check(sys.argv[2], sys.argv[3], sys.argv[4], [int(v) for v in sys.argv[5:]])
    elif sys.argv[1] == "torch":
        torch_cnn(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit("usage: onnx_run.py check|torch ...")
