"""Runs ONNX files in onnxruntime for tests/onnx/test_onnx_rnn_runtime.cpp: kiln's exports of
recurrent nets, several per call (one Python start for all of them).

  ort_run.py MANIFEST
      MANIFEST lines: model.onnx, input.bin, output.bin, input shape (comma list). Each model is
      checked by onnx.checker (full_check) and run in onnxruntime (graph optimisations off) on the
      float32 input (raw little-endian); its first output is written raw float32. Prints one line
      per model; exits non-zero on the first model either rejects.
"""
import sys

import numpy as np


def main(manifest):
    import onnx
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.log_severity_level = 4
    with open(manifest) as f:
        for line in f:
            if not line.strip():
                continue
            model, inp, out, shape = line.rstrip("\n").split("\t")
            onnx.checker.check_model(onnx.load(model), full_check=True)
            x = np.fromfile(inp, dtype="<f4").reshape([int(d) for d in shape.split(",")])
            sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
            y = sess.run(None, {sess.get_inputs()[0].name: x})[0]
            y.astype("<f4").tofile(out)
            print(f"onnxruntime {ort.__version__}: {model}: output {list(y.shape)}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: ort_run.py MANIFEST")
    main(sys.argv[1])
