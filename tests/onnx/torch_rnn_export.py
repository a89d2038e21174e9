"""Exports PyTorch's recurrent layers (nn.LSTM, nn.GRU, nn.RNN) with both of PyTorch's ONNX
exporters for tests/onnx/test_onnx_rnn_torch.cpp, and runs each file in onnxruntime.

  torch_rnn_export.py OUT_DIR [NET ...]
      for each net and exporter (legacy: the TorchScript one, dynamo=False; dynamo: torch.export's)
      writes OUT_DIR/<net>_<exporter>.onnx, the input (<net>.in.bin), PyTorch's output
      (<net>.torch.bin) and onnxruntime's (<net>_<exporter>.ort.bin), raw float32, and a line of
      OUT_DIR/manifest.tsv: net, exporter, opset, "ok" or "export failed: <why>", input shape,
      output shape, seconds, the batch dim exported free ("-": none).

The nets have random weights (seeded), run in eval mode, and are exported as a user gets it
(torch.onnx.export(net, (x,), path, dynamo=...), the exporters' default opset, fixed shapes, or
the batch dim free for the *_free_batch nets). What
the exporters write: the TorchScript one an ONNX LSTM / GRU / RNN node per layer with Transpose and
Reshape glue and a zero initial state made by Expand(zeros, Shape(x)...); the dynamo one LSTM and
GRU nodes with zero initializers as initial states, and nn.RNN decomposed into MatMul, Add, Tanh /
Relu and Slice steps (its torch_lib has no RNN node).
"""
import os
import sys
import time
import warnings

import numpy as np

T, N, I, H = 5, 3, 4, 6


def nets():
    """name -> (module factory, input shape, the batch dim exported free or None)."""
    import torch

    class Out(torch.nn.Module):
        """The output sequence (a Linear on it with head)."""

        def __init__(self, rnn, head=False):
            super().__init__()
            self.rnn = rnn
            d = 2 if rnn.bidirectional else 1
            self.head = torch.nn.Linear(d * rnn.hidden_size, 3) if head else None

        def forward(self, x):
            y = self.rnn(x)[0]
            return self.head(y) if self.head is not None else y

    class States(torch.nn.Module):
        """Output, h_n (and c_n) flattened and concatenated (reshape(-1): the TorchScript exporter
        writes flatten() as a Reshape to a shape computed from Shape, which kiln does not map)."""

        def __init__(self, rnn):
            super().__init__()
            self.rnn = rnn

        def forward(self, x):
            y, h = self.rnn(x)
            parts = [y.reshape(-1), *(t.reshape(-1) for t in (h if isinstance(h, tuple) else (h,)))]
            return torch.cat(parts)

    class Learned(torch.nn.Module):
        """Learned initial states, parameters of the net."""

        def __init__(self, rnn):
            super().__init__()
            self.rnn = rnn
            d = (2 if rnn.bidirectional else 1) * rnn.num_layers
            self.h0 = torch.nn.Parameter(torch.randn(d, N, rnn.hidden_size) * 0.5)
            self.lstm = isinstance(rnn, torch.nn.LSTM)
            if self.lstm:
                self.c0 = torch.nn.Parameter(torch.randn(d, N, rnn.hidden_size) * 0.5)

        def forward(self, x):
            return self.rnn(x, (self.h0, self.c0) if self.lstm else self.h0)[0]

    tm, bf = [T, N, I], [N, T, I]
    return {
        "lstm": (lambda: Out(torch.nn.LSTM(I, H)), tm, None),
        "lstm_2l_bidir_bf": (lambda: Out(torch.nn.LSTM(I, H, 2, bidirectional=True, batch_first=True), head=True), bf,
                             None),
        "lstm_2l_bidir_bf_free_batch": (lambda: Out(torch.nn.LSTM(I, H, 2, bidirectional=True, batch_first=True)), bf,
                                        0),
        "lstm_states": (lambda: States(torch.nn.LSTM(I, H, 2)), tm, None),
        "lstm_learned_h0": (lambda: Learned(torch.nn.LSTM(I, H, 2, bidirectional=True)), tm, None),
        "gru": (lambda: Out(torch.nn.GRU(I, H)), tm, None),
        "gru_free_batch": (lambda: Out(torch.nn.GRU(I, H)), tm, 1),
        "gru_2l_bidir_bf_states": (lambda: States(torch.nn.GRU(I, H, 2, bidirectional=True, batch_first=True)), bf,
                                   None),
        "gru_no_bias_learned_h0": (lambda: Learned(torch.nn.GRU(I, H, bias=False)), tm, None),
        "rnn_tanh": (lambda: Out(torch.nn.RNN(I, H)), tm, None),
        "rnn_relu_bidir_bf": (lambda: Out(torch.nn.RNN(I, H, 2, nonlinearity="relu", bidirectional=True,
                                                       batch_first=True)), bf, None),
        "rnn_states": (lambda: States(torch.nn.RNN(I, H, 2)), tm, None),
    }


def export(net, x, path, exporter, free):
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "legacy":
            axes = {} if free is None else {"dynamic_axes": {"input": {free: "N"}, "output": {free: "N"}}}
            torch.onnx.export(net, (x,), path, dynamo=False, input_names=["input"], output_names=["output"], **axes)
        else:
            shapes = {} if free is None else {"dynamic_shapes": ({free: torch.export.Dim("N")},)}
            torch.onnx.export(net, (x,), path, dynamo=True, input_names=["input"], output_names=["output"],
                              external_data=False, verbose=False, **shapes)


def run_ort(path, x):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    opts.log_severity_level = 4
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x})[0]


def main(out_dir, names):
    import contextlib
    import io

    import onnx
    import torch

    torch.set_num_threads(2)
    os.makedirs(out_dir, exist_ok=True)
    table = nets()
    lines = []
    for name in names or list(table):
        make, shape, free = table[name]
        torch.manual_seed(sum(map(ord, name)))
        net = make().eval()
        x = torch.from_numpy((np.sin(0.37 * np.arange(np.prod(shape)) + 0.3)).astype(np.float32).reshape(shape))
        with torch.no_grad():
            y = net(x).numpy()
        x.numpy().astype("<f4").tofile(os.path.join(out_dir, f"{name}.in.bin"))
        y.astype("<f4").tofile(os.path.join(out_dir, f"{name}.torch.bin"))
        for exporter in ("legacy", "dynamo"):
            t0 = time.time()
            path = os.path.join(out_dir, f"{name}_{exporter}.onnx")
            opset, status = 0, "ok"
            try:
                with contextlib.redirect_stdout(io.StringIO()):  # the dynamo exporter's progress lines
                    export(net, x, path, exporter, free)
                m = onnx.load(path)
                opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), 0)
                run_ort(path, x.numpy()).astype("<f4").tofile(os.path.join(out_dir, f"{name}_{exporter}.ort.bin"))
            except Exception as e:  # noqa: BLE001 - reported per file, the C++ test decides
                status = "export failed: " + " ".join(str(e).split())[:200]
            lines.append("\t".join([name, exporter, str(opset), status, ",".join(map(str, x.shape)),
                                    ",".join(map(str, y.shape)), f"{time.time() - t0:.1f}",
                                    "-" if free is None else str(free)]))
            print(lines[-1], flush=True)
    with open(os.path.join(out_dir, "manifest.tsv"), "w") as f:
        f.write(f"# torch {torch.__version__}, onnx {onnx.__version__}\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: torch_rnn_export.py OUT_DIR [NET ...]")
    main(sys.argv[1], sys.argv[2:])
