"""PyTorch's side of tests/layers/test_rnn_torch.cpp: builds torch.nn.{RNN,LSTM,GRU} from a JSON
spec, draws its parameters and inputs from a seed, runs forward (through pack_padded_sequence
when lengths are given) and backward of loss = sum(output * wy) + sum(h_n * wh) + sum(c_n * wc),
and writes DIR/inputs.safetensors (state_dict, x, h0, c0, lengths, wy, wh, wc) and
DIR/expected.safetensors (output, h_n, c_n, loss and grad.<name> of every input and parameter).

    python torch_rnn.py DIR '{"mode": "lstm", "layers": 2, ...}'
"""
import json
import sys

import torch
from safetensors.torch import save_file

out_dir, spec = sys.argv[1], json.loads(sys.argv[2])
dtype = {"float32": torch.float32, "float64": torch.float64}[spec["dtype"]]
torch.manual_seed(spec["seed"])
mode = spec["mode"]
L, N, I, H = spec["L"], spec["N"], spec["I"], spec["H"]
kw = dict(input_size=I, hidden_size=H, num_layers=spec["layers"], bias=spec["bias"],
          batch_first=spec["batch_first"], bidirectional=spec["bidirectional"])
if mode == "lstm":
    net = torch.nn.LSTM(proj_size=spec["proj"], **kw)
elif mode == "gru":
    net = torch.nn.GRU(**kw)
else:
    net = torch.nn.RNN(nonlinearity="relu" if mode == "rnn_relu" else "tanh", **kw)
net = net.to(dtype)
D = 2 if spec["bidirectional"] else 1
Ho = spec["proj"] if spec.get("proj") else H
x = torch.randn((N, L, I) if spec["batch_first"] else (L, N, I), dtype=dtype, requires_grad=True)
h0 = torch.randn(D * spec["layers"], N, Ho, dtype=dtype, requires_grad=True)
c0 = torch.randn(D * spec["layers"], N, H, dtype=dtype, requires_grad=True)
lengths = torch.randint(1, L + 1, (N,), dtype=torch.int64)
lengths[0] = L  # pad_packed_sequence's longest then spans L
state = (h0, c0) if mode == "lstm" else h0
if spec["lengths"]:
    packed = torch.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=spec["batch_first"], enforce_sorted=False)
    out_p, hx = net(packed, state)
    out, _ = torch.nn.utils.rnn.pad_packed_sequence(out_p, batch_first=spec["batch_first"], total_length=L)
else:
    out, hx = net(x, state)
h_n, c_n = hx if mode == "lstm" else (hx, None)
wy, wh = torch.randn_like(out), torch.randn_like(h_n)
loss = (out * wy).sum() + (h_n * wh).sum()
wc = torch.randn_like(c_n) if c_n is not None else torch.zeros(1, dtype=dtype)
if c_n is not None:
    loss = loss + (c_n * wc).sum()
loss.backward()

inputs = {k: v.detach().contiguous() for k, v in net.state_dict().items()}
inputs.update(x=x.detach(), h0=h0.detach(), c0=c0.detach(), lengths=lengths, wy=wy, wh=wh, wc=wc)
expected = {"output": out.detach().contiguous(), "h_n": h_n.detach().contiguous(), "loss": loss.detach().reshape(1)}
if c_n is not None:
    expected["c_n"] = c_n.detach().contiguous()
expected.update({"grad.x": x.grad, "grad.h0": h0.grad})
if mode == "lstm":
    expected["grad.c0"] = c0.grad
for name, p in net.named_parameters():
    expected["grad." + name] = p.grad.contiguous()
save_file({k: v.contiguous() for k, v in inputs.items()}, out_dir + "/inputs.safetensors")
save_file({k: v.contiguous() for k, v in expected.items()}, out_dir + "/expected.safetensors")
