"""Runs an ONNX model in onnxruntime for tests/e2e/test_onnx_runtime.cpp.

  onnx_run.py check MODEL.onnx INPUT.bin OUTPUT.bin N C H W
      onnx.checker.check_model, then onnxruntime on the float32 input (raw little-endian, NCHW);
      writes the first output as raw float32 and prints its shape.
(PyTorch's export for tests/e2e/test_onnx.cpp: tests/fixtures/make_torch_cnn_onnx.py.)
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


if __name__ == "__main__":
    if sys.argv[1] == "check":
        check(sys.argv[2], sys.argv[3], sys.argv[4], [int(v) for v in sys.argv[5:]])
    else:
        sys.exit("usage: onnx_run.py check MODEL.onnx INPUT.bin OUTPUT.bin N C H W")
