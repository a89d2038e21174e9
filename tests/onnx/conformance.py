"""The ONNX backend node tests for the op types kiln's importer maps, rebuilt from the onnx
package's own test generators (onnx/backend/test/case/node/*.py: the PyPI wheel ships the
generators, not the data) for tests/onnx/test_onnx_conformance.cpp.

  conformance.py generate OUT_DIR [OP ...]
      writes OUT_DIR/<case>/model.onnx, input.bin, expected.bin and OUT_DIR/manifest.tsv.

kiln's graphs take one input: a case's first input stays the graph input, the others become
initializers. Each manifest line: name, op type, model opset, rtol, atol, input element type,
input shape, output element type, output shape (shapes as comma lists, "-" for a scalar). The
tensors are raw little-endian in their own element type (float32 for every case kiln can run).
A recurrent case (LSTM, GRU, RNN) that checks several outputs (Y, Y_h, Y_c) becomes one case per
output, the graph keeping that output alone: <case> for the first, <case>_<output> for the others.
Cases whose name has "_expanded" test the op's function body (other op types) and are left out;
the manifest's header counts them.

The node tests build every case at the newest opset. The kiln_* cases (legacy.py) add the mapped
ops at older opsets, where their meaning differs (Softmax's axis before 13, Slice, Pad, Reshape,
Upsample and Resize attributes vs inputs, Dropout, pooling), and the forms exporters write
(batched and broadcast MatMul, Gemm with alpha, beta, transposes and each broadcastable C), with
onnxruntime's output as the expected one.
"""
import importlib
import os
import sys
import time

import numpy as np

# The op types io/onnx/onnx_import.cpp maps and the generator module that holds their cases.
MODULES = {
    "Add": "add", "AveragePool": "averagepool", "BatchNormalization": "batch_normalization",
    "Concat": "concat", "Constant": "constant", "Conv": "conv", "ConvTranspose": "convtranspose",
    "Div": "div", "Dropout": "dropout", "Flatten": "flatten", "Gemm": "gemm",
    "GlobalAveragePool": "globalaveragepool", "GlobalMaxPool": "globalmaxpool", "GRU": "gru", "Identity": "identity",
    "LeakyRelu": "leakyrelu", "LogSoftmax": "logsoftmax", "LRN": "lrn", "LSTM": "lstm", "MatMul": "matmul",
    "MaxPool": "maxpool", "Mul": "mul", "Pad": "pad", "ReduceMean": "reducemean", "Relu": "relu", "Reshape": "reshape",
    "Resize": "resize", "RNN": "rnn", "Sigmoid": "sigmoid", "Slice": "slice", "Softmax": "softmax", "Squeeze": "squeeze",
    "Sub": "sub",
    "Sum": "sum", "Tanh": "tanh", "Transpose": "transpose", "Unsqueeze": "unsqueeze", "Upsample": "upsample",
}


def collect(ops):
    # Importing a generator module runs its export_* functions, which append to _NodeTestCases
    # (onnx/backend/test/case/base.py); importing only these modules keeps it to a few seconds.
    import onnx.backend.test.case.node as node

    for op in ops:
        importlib.import_module("onnx.backend.test.case.node." + MODULES[op])
    return [c for c in node._NodeTestCases if c.kind == "node"]


def dims(a):
    return ",".join(str(d) for d in a.shape) if a.ndim else "-"


# The ops of several outputs kiln computes (Y, Y_h, Y_c): a case that checks more than one becomes
# one case per output (the first under the case's own name, the others as <case>_<output name>).
RECURRENT = {"LSTM", "GRU", "RNN"}


def convert(case, out_dir):
    """The manifest lines of a case (one, or one per output of a recurrent case)."""
    import onnx
    from onnx import numpy_helper

    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    graph = model.graph
    inputs, outputs = case.data_sets[0]
    ops = sorted({n.op_type for n in graph.node})
    op = next((o for o in ops if o in MODULES), ops[0] if ops else "?")
    # Inputs after the first become initializers (the graph input entries go: IR >= 4).
    keep = list(graph.input)[:1]
    for vi, value in zip(list(graph.input)[1:], inputs[1:]):
        if value is None:
            continue
        t = numpy_helper.from_array(np.asarray(value), vi.name)
        graph.initializer.append(t)
    del graph.input[:]
    graph.input.extend(keep)
    if model.ir_version < 4:
        model.ir_version = 4
    x = np.asarray(inputs[0]) if inputs else np.zeros([0], np.float32)
    if op not in RECURRENT or len(graph.output) < 2:
        y = np.asarray(outputs[0]) if outputs else np.zeros([0], np.float32)
        return [write_case(model, case.name, op, case, x, y, out_dir)]
    lines = []
    all_outputs = list(graph.output)
    for j, (vi, y) in enumerate(zip(all_outputs, outputs)):
        del graph.output[:]
        graph.output.extend([vi])
        name = case.name if j == 0 else f"{case.name}_{vi.name}"
        lines.append(write_case(model, name, op, case, x, np.asarray(y), out_dir))
    return lines


def write_case(model, name, op, case, x, y, out_dir):
    import onnx

    case_dir = os.path.join(out_dir, name)
    os.makedirs(case_dir, exist_ok=True)
    onnx.save(model, os.path.join(case_dir, "model.onnx"))
    for fname, a in (("input.bin", x), ("expected.bin", y)):
        if a.dtype == object:
            a = np.zeros([0], np.float32)
        a.astype(a.dtype.newbyteorder("<")).tofile(os.path.join(case_dir, fname))
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    rtol = case.rtol if case.rtol is not None else 1e-3
    atol = case.atol if case.atol is not None else 1e-7
    return "\t".join([name, op, str(opset), repr(float(rtol)), repr(float(atol)), str(x.dtype), dims(x),
                      str(y.dtype), dims(y)])


def generate(out_dir, ops):
    import warnings

    warnings.simplefilter("ignore")
    t0 = time.time()
    os.makedirs(out_dir, exist_ok=True)
    cases = collect(ops)
    lines, expanded = [], 0
    for c in cases:
        if "_expanded" in c.name:
            expanded += 1
            continue
        if not any(n.op_type in ops for n in c.model.graph.node):
            continue
        lines.extend(convert(c, out_dir))
    node_cases = len(lines)
    import onnx

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import legacy

    for c in legacy.cases(ops):
        lines.extend(convert(c, out_dir))
    with open(os.path.join(out_dir, "manifest.tsv"), "w") as f:
        f.write(f"# onnx {onnx.__version__}, newest opset {onnx.defs.onnx_opset_version()}, {node_cases} node test "
                f"cases ({expanded} _expanded left out), {len(lines) - node_cases} kiln cases\n")
        f.write("\n".join(lines) + "\n")
    print(f"conformance.py: onnx {onnx.__version__}: {node_cases} node test cases ({expanded} _expanded left out), "
          f"{len(lines) - node_cases} kiln cases (older opsets, exporters' forms) in {time.time() - t0:.1f} s")


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "generate":
        generate(sys.argv[2], sys.argv[3:] or sorted(MODULES))
    else:
        sys.exit("usage: conformance.py generate OUT_DIR [OP ...]")
