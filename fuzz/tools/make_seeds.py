#!/usr/bin/env python3
"""Writes the seed corpora fuzz/corpus/<target>/: tiny valid files of every format (bytes, not MB).
Needs numpy and Pillow (the test venv: tools/install-deps.sh --test).
    .venv/bin/python fuzz/tools/make_seeds.py"""
import gzip, io, json, os, shutil, struct, zipfile

import numpy as np
from PIL import Image

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "corpus")
REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def put(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def idx(arr):
    a = np.asarray(arr, dtype=np.uint8)
    return struct.pack(">I", 0x800 | a.ndim) + b"".join(struct.pack(">I", d) for d in a.shape) + a.tobytes()


rng = np.random.default_rng(0)
imgs = rng.integers(0, 256, (2, 4, 4))
put("idx", "images-idx3", idx(imgs))
put("idx", "labels-idx1", idx([3, 7, 1]))
put("idx", "images-idx3.gz", gzip.compress(idx(imgs), mtime=0))
put("idx", "labels-idx1.gz", gzip.compress(idx([0, 9]), mtime=0))

put("cifar", "cifar10-1", bytes([3]) + rng.integers(0, 256, 3072, dtype=np.uint8).tobytes())
put("cifar", "cifar100-1", bytes([4, 42]) + rng.integers(0, 256, 3072, dtype=np.uint8).tobytes())


def npy(a, version=None):
    b = io.BytesIO()
    if version:
        np.lib.format.write_array(b, a, version=version)
    else:
        np.save(b, a)
    return b.getvalue()


put("npy", "f4", npy(np.arange(6, dtype="<f4").reshape(2, 3)))
put("npy", "u1", npy(np.arange(4, dtype=np.uint8)))
put("npy", "i8-v2", npy(np.arange(3, dtype="<i8"), version=(2, 0)))
put("npy", "bool-scalar", npy(np.array(True)))

x = rng.integers(0, 256, (4, 2, 2), dtype=np.uint8)
y = np.array([0, 1, 2, 1], dtype=np.int64)
for name, fn in (("savez", np.savez), ("savez-compressed", np.savez_compressed)):
    b = io.BytesIO()
    fn(b, x_train=x, y_train=y, x_test=x[:2], y_test=y[:2])
    put("npz", name, b.getvalue())
b = io.BytesIO()
np.savez_compressed(b, images=rng.random((10, 2, 2), dtype=np.float32), masks=(x[:1].repeat(10, 0) > 128))
put("npz", "images-masks", b.getvalue())
b = io.BytesIO()
with zipfile.ZipFile(b, "w", zipfile.ZIP_DEFLATED) as z:  # ZIP64 records, as numpy writes big members
    for k, a in (("x_train", x), ("y_train", y), ("x_test", x[:2]), ("y_test", y[:2])):
        with z.open(k + ".npy", "w", force_zip64=True) as f:
            f.write(npy(a))
put("npz", "zip64", b.getvalue())


def safetensors(tensors, meta=None):
    header, data = {}, b""
    for k, a in tensors.items():
        tag = {"float32": "F32", "int64": "I64", "uint8": "U8", "float16": "F16"}[str(a.dtype)]
        header[k] = {"dtype": tag, "shape": list(a.shape), "data_offsets": [len(data), len(data) + a.nbytes]}
        data += a.tobytes()
    if meta:
        header["__metadata__"] = meta
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + data


put("safetensors", "two", safetensors({"w": np.ones((2, 2), np.float32), "b": np.arange(2, dtype=np.int64)},
                                      {"format": "pt"}))
put("safetensors", "half-empty", safetensors({"h": np.zeros(3, np.float16), "e": np.zeros((0, 4), np.uint8)}))


def pil(img, fmt, **kw):
    b = io.BytesIO()
    img.save(b, fmt, **kw)
    return b.getvalue()


rgb = Image.fromarray(rng.integers(0, 256, (8, 12, 3), dtype=np.uint8), "RGB")
put("jpeg", "rgb", pil(rgb, "JPEG", quality=50))
put("jpeg", "progressive", pil(rgb, "JPEG", quality=50, progressive=True))
put("jpeg", "gray", pil(rgb.convert("L"), "JPEG", quality=50))
put("jpeg", "subsampled", pil(rgb, "JPEG", quality=30, subsampling=2))
put("png", "rgb", pil(rgb, "PNG"))
put("png", "gray", pil(rgb.convert("L"), "PNG"))
put("png", "palette", pil(rgb.convert("P"), "PNG"))
put("png", "rgba-interlaced", pil(rgb.convert("RGBA"), "PNG", interlace=1))
put("png", "gray16", pil(Image.fromarray(rng.integers(0, 65535, (5, 7), dtype=np.uint16)), "PNG"))
put("png", "bilevel", pil(rgb.convert("1"), "PNG"))

os.makedirs(os.path.join(ROOT, "onnx"), exist_ok=True)
shutil.copy(os.path.join(REPO, "tests", "fixtures", "torch_cnn.onnx"), os.path.join(ROOT, "onnx", "torch_cnn.onnx"))


# ONNX graphs whose sizes are hostile (each within its op's own bounds): every tensor an imported
# graph makes is checked against KILN_ONNX_MAX_TENSOR_BYTES before it is allocated. Written with a
# small protobuf encoder (field numbers from onnx.proto), so no onnx package is needed.
def pb_varint(v):
    out = bytearray()
    v &= (1 << 64) - 1
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def pb(field, value):
    if isinstance(value, int):
        return pb_varint(field << 3) + pb_varint(value)
    if isinstance(value, float):
        return pb_varint(field << 3 | 5) + struct.pack("<f", value)
    data = value.encode() if isinstance(value, str) else value
    return pb_varint(field << 3 | 2) + pb_varint(len(data)) + data


def onnx_value(name, dims):  # ValueInfoProto, float tensor
    shape = b"".join(pb(1, pb(1, d)) for d in dims)
    return pb(1, name) + pb(2, pb(1, pb(1, 1) + pb(2, shape)))


def onnx_ints(name, v):  # TensorProto, int64
    return pb(1, len(v)) + pb(2, 7) + b"".join(pb(7, x) for x in v) + pb(8, name)


def onnx_floats(name, dims, v):  # TensorProto, float
    return b"".join(pb(1, d) for d in dims) + pb(2, 1) + b"".join(pb(4, float(x)) for x in v) + pb(8, name)


def onnx_model(op, in_dims, inputs, inits, attrs=b""):
    node = b"".join(pb(1, i) for i in ["x"] + inputs) + pb(2, "y") + pb(3, "n") + pb(4, op) + attrs
    graph = pb(1, node) + pb(2, "hostile") + b"".join(pb(5, t) for t in inits)
    graph += pb(11, onnx_value("x", in_dims)) + pb(12, onnx_value("y", []))
    return pb(1, 7) + pb(8, pb(1, "") + pb(2, 13)) + pb(7, graph)


def onnx_ints_attr(name, v):  # AttributeProto, INTS
    return pb(5, pb(1, name) + b"".join(pb(8, x) for x in v) + pb(20, 7))


big = 1 << 24
put("onnx", "hostile-resize-sizes.onnx",
    onnx_model("Resize", [1, 3, 8, 8], ["", "", "sizes"], [onnx_ints("sizes", [1, 3, big, big])]))
put("onnx", "hostile-resize-scales.onnx",
    onnx_model("Resize", [1, 3, 8, 8], ["", "scales"], [onnx_floats("scales", [4], [1, 1, 1e6, 1e6])]))
put("onnx", "hostile-conv-pads.onnx",
    onnx_model("Conv", [1, 1, 4, 4], ["w"], [onnx_floats("w", [1, 1, 1, 1], [1])],
               onnx_ints_attr("pads", [1 << 20] * 4)))
put("onnx", "hostile-pad.onnx",
    onnx_model("Pad", [1, 1, 4, 4], ["pads"], [onnx_ints("pads", [0, 0, big, big, 0, 0, big, big])]))
put("onnx", "hostile-input.onnx", onnx_model("Relu", [1, 3, 1 << 20, 1 << 20], [], []))



# Recurrent nodes (io/onnx/onnx_rnn.cpp): a bidirectional LSTM with B, an int32 sequence_lens and
# explicit activations (a STRINGS attribute), Y_h the graph's output; a GRU whose zero initial
# state is ConstantOfShape(Shape(x)) sliced, as PyTorch's TorchScript exporter writes it.
def onnx_attr(name, kind, value):  # AttributeProto: "i" INT, "s" STRING, "ss" STRINGS
    if kind == "i":
        return pb(5, pb(1, name) + pb(3, value) + pb(20, 2))
    if kind == "s":
        return pb(5, pb(1, name) + pb(4, value) + pb(20, 3))
    return pb(5, pb(1, name) + b"".join(pb(9, x) for x in value) + pb(20, 8))


def onnx_node(op, inputs, outputs, attrs=b""):
    return pb(1, b"".join(pb(1, i) for i in inputs) + b"".join(pb(2, o) for o in outputs) + pb(3, outputs[0] or op)
              + pb(4, op) + attrs)


def onnx_graph_model(nodes, in_dims, output, out_dims, inits, opset=13):
    graph = b"".join(nodes) + pb(2, "recurrent") + b"".join(pb(5, t) for t in inits)
    graph += pb(11, onnx_value("x", in_dims)) + pb(12, onnx_value(output, out_dims))
    return pb(1, 7) + pb(8, pb(1, "") + pb(2, opset)) + pb(7, graph)


def onnx_int32s(name, v):  # TensorProto, int32
    return pb(1, len(v)) + pb(2, 6) + b"".join(pb(5, x) for x in v) + pb(8, name)


def wave(n, f):
    return [0.5 * np.sin(f * i + 0.3) for i in range(n)]


T, N, I, H = 4, 2, 3, 2
put("onnx", "lstm-bidir.onnx", onnx_graph_model(
    [onnx_node("LSTM", ["x", "W", "R", "B", "lens"], ["y", "y_h", "y_c"],
               onnx_attr("hidden_size", "i", H) + onnx_attr("direction", "s", "bidirectional")
               + onnx_attr("activations", "ss", ["Sigmoid", "Tanh", "Tanh"] * 2))],
    [T, N, I], "y_h", [2, N, H],
    [onnx_floats("W", [2, 4 * H, I], wave(2 * 4 * H * I, 0.7)), onnx_floats("R", [2, 4 * H, H], wave(2 * 4 * H * H, 1.1)),
     onnx_floats("B", [2, 8 * H], wave(2 * 8 * H, 1.3)), onnx_int32s("lens", [4, 2])]))
put("onnx", "gru-zero-state.onnx", onnx_graph_model(
    [onnx_node("Shape", ["x"], ["shape"]),
     onnx_node("ConstantOfShape", ["shape"], ["zeros"]),
     onnx_node("Slice", ["zeros", "s0", "s1", "s0"], ["h0"]),
     onnx_node("GRU", ["x", "W", "R", "", "", "h0"], ["y", ""],
               onnx_attr("hidden_size", "i", H) + onnx_attr("linear_before_reset", "i", 1))],
    [T, N, H], "y", [T, 1, N, H],  # input_size = hidden_size: Shape(x) sliced is the state's [1, N, H]
    [onnx_floats("W", [1, 3 * H, H], wave(3 * H * H, 0.9)), onnx_floats("R", [1, 3 * H, H], wave(3 * H * H, 0.5)),
     onnx_ints("s0", [0]), onnx_ints("s1", [1])]))

put("catalogue", "one", json.dumps({"datasets": [{
    "name": "tiny", "description": "a test set", "size": "1 KB", "licence": "CC0", "homepage": "https://example.org",
    "files": [{"name": "a.gz", "url": "https://example.org/a.gz", "bytes": 10, "md5": "0" * 32,
               "sha256": "1" * 64, "content_md5": "2" * 32}]}]}))
put("catalogue", "manual", json.dumps({"datasets": [{
    "name": "big", "description": "manual", "manual": True, "manual_note": "register first",
    "extract": "big.tar", "data_subdir": "big", "files": [{"name": "big.tar", "url": "", "bytes": 100}]}]}))

put("dataset_spec", "cifar", "3x32x32:10:100")
put("dataset_spec", "mnist-learnable", "1x28x28:10:50:learnable")
put("dataset_spec", "flat", "16:2:4")

# checkpoint: sidecars naming the fixed tensor files fuzz/targets/checkpoint.cpp writes.
import hashlib
h = b'{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
h += b" " * ((8 - len(h) % 8) % 8)
tensor = struct.pack("<Q", len(h)) + h + struct.pack("<2f", 1.0, 2.0)
entry = {"file": "a.safetensors", "bytes": len(tensor), "sha256": hashlib.sha256(tensor).hexdigest()}
put("checkpoint", "ckpt.json", json.dumps({
    "format": "kiln-checkpoint", "version": 1, "step": 100, "weights": entry,
    "optimizer": dict(entry, file="b.safetensors"),
    "state": {"step": 100, "model": "mlp", "optimizer": {"name": "sgd", "lr": 0.1}}}, indent=2) + "\n")
put("checkpoint", "no-step.json", json.dumps({
    "format": "kiln-checkpoint", "version": 1, "weights": entry, "optimizer": entry, "state": {}}))

# cli_flags: command lines, arguments separated by NUL bytes (fuzz/targets/cli_flags.cpp).
for name, argv in (("train", ["train", "--model", "mnist-cnn", "--data", "synthetic:1x28x28:10:64", "--epochs", "2",
                              "--batch", "32", "--lr", "0.1"]),
                   ("bench", ["bench", "--model", "alexnet,vgg11", "--batch", "16,64", "--mode", "forward,train",
                              "--iters", "5"]),
                   ("data", ["data", "fetch", "mnist", "--from", "/tmp/x/"]),
                   ("eval", ["eval", "--checkpoint", "ckpt.json", "--data", "fashion-mnist"]),
                   ("scale", ["scale", "--compare", "horovod-p100"]),
                   ("export", ["export", "--model", "resnet18", "--onnx", "out.onnx"])):
    put("cli_flags", name, "\0".join(argv))
