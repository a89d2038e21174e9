"""kiln's own cases for tests/onnx/conformance.py: the mapped ops at older opsets (where their
meaning differs from the newest) and the forms exporters write, one node each, expected outputs
from onnxruntime (which implements every opset). A case onnxruntime itself rejects is left out.

Each case: a name ("kiln_<op>_..."), the opset, the node (op type, attributes), the graph input
x and the other inputs as initializers (None: the optional input left out, ""), and optionally the
node's outputs (each a graph output; the recurrent ops' Y, Y_h, Y_c: conformance.py makes a case
of each).
"""
import types

import numpy as np


def _rand(*shape, seed=0):
    return np.random.RandomState(seed + 7 * len(shape) + sum(shape)).uniform(-2, 2, shape).astype(np.float32)


def _i64(*v):
    return np.array(v, dtype=np.int64)


def _f32(*v):
    return np.array(v, dtype=np.float32)


def _specs():
    """(name, opset, op, attrs, x, [other inputs])."""
    x3 = _rand(2, 3, 4)
    x4 = _rand(2, 3, 5, 6)
    specs = []
    add = specs.append
    # Softmax / LogSoftmax: before opset 13 the input is flattened to 2-d at axis (default 1).
    for op in ("Softmax", "LogSoftmax"):
        for opset in (7, 11, 13):
            for axis in (None, 0, 1, 2, -1):
                attrs = {} if axis is None else {"axis": axis}
                tag = "default" if axis is None else str(axis).replace("-", "m")
                add((f"kiln_{op.lower()}_opset{opset}_axis_{tag}", opset, op, attrs, x3, []))
    # Slice: attributes up to opset 9, inputs (with steps) from 10.
    add(("kiln_slice_opset9_attrs", 9, "Slice", {"starts": [1, 0], "ends": [1000, -1], "axes": [2, 0]}, x3, []))
    add(("kiln_slice_opset9_default_axes", 9, "Slice", {"starts": [0, 1], "ends": [1, 3]}, x3, []))
    add(("kiln_slice_opset9_negative", 9, "Slice", {"starts": [-3], "ends": [-1], "axes": [-1]}, x3, []))
    add(("kiln_slice_opset13_neg_steps", 13, "Slice", {}, x3, [_i64(-1, 3), _i64(-1000, 0), _i64(2, 1), _i64(-1, -2)]))
    add(("kiln_slice_opset13_neg_step_clamp", 13, "Slice", {}, x3, [_i64(1000), _i64(-1000), _i64(2), _i64(-3)]))
    add(("kiln_slice_opset10_steps", 10, "Slice", {}, x4, [_i64(0, 1), _i64(6, 5), _i64(3, 2), _i64(2, 3)]))
    # Pad: attributes up to opset 10, inputs from 11, axes from 18, wrap from 19.
    for mode in ("constant", "reflect", "edge"):
        add((f"kiln_pad_opset10_{mode}", 10, "Pad", {"mode": mode, "pads": [0, 1, 2, 1, 0, 2, 1, 0],
                                                     **({"value": 1.5} if mode == "constant" else {})}, x4, []))
        add((f"kiln_pad_opset11_{mode}", 11, "Pad", {"mode": mode}, x4,
             [_i64(0, 0, 2, 1, 0, 0, 1, 2)] + ([_f32(-0.5)] if mode == "constant" else [])))
    add(("kiln_pad_opset18_axes", 18, "Pad", {"mode": "reflect"}, x4, [_i64(1, 2, 2, 0), None, _i64(-1, 2)]))
    add(("kiln_pad_opset18_axes_constant", 18, "Pad", {}, x4, [_i64(1, 1, 0, 2), _f32(3.0), _i64(1, 3)]))
    add(("kiln_pad_opset19_wrap", 19, "Pad", {"mode": "wrap"}, x4, [_i64(0, 0, 2, 1, 0, 0, 1, 3)]))
    add(("kiln_pad_opset13_crop", 13, "Pad", {}, x4, [_i64(0, 0, -1, 2, 0, 0, 1, -2)]))
    add(("kiln_pad_opset11_rank3_edge", 11, "Pad", {"mode": "edge"}, x3, [_i64(1, 1, 1, 0, 2, 2)]))
    # Reshape: 0 copies a dim, -1 infers one.
    for opset in (7, 13, 14):
        add((f"kiln_reshape_opset{opset}_zero_minus1", opset, "Reshape", {}, x4, [_i64(0, -1, 6)]))
        add((f"kiln_reshape_opset{opset}_flatten", opset, "Reshape", {}, x4, [_i64(2, -1)]))
    add(("kiln_reshape_opset14_allowzero_no_zero", 14, "Reshape", {"allowzero": 1}, x4, [_i64(6, 5, -1)]))
    # Upsample (opset 7: scales attribute; 9: input) and Resize-10: x_out / scale.
    add(("kiln_upsample_opset7_nearest", 7, "Upsample", {"mode": "nearest", "scales": [1.0, 1.0, 2.0, 3.0]}, x4, []))
    add(("kiln_upsample_opset9_nearest", 9, "Upsample", {"mode": "nearest"}, x4, [_f32(1, 1, 2, 2)]))
    add(("kiln_upsample_opset9_linear", 9, "Upsample", {"mode": "linear"}, x4, [_f32(1, 1, 2, 1.5)]))
    add(("kiln_resize_opset10_nearest", 10, "Resize", {"mode": "nearest"}, x4, [_f32(1, 1, 2, 3)]))
    add(("kiln_resize_opset10_linear", 10, "Resize", {"mode": "linear"}, x4, [_f32(1, 1, 1.5, 2)]))
    add(("kiln_resize_opset10_linear_down", 10, "Resize", {"mode": "linear"}, x4, [_f32(1, 1, 0.6, 0.5)]))
    # Resize the way exporters write it (opset 11 and 13, sizes and scales, PyTorch's modes).
    for ct, mode, nm in (("asymmetric", "nearest", "floor"),
                         ("pytorch_half_pixel", "linear", "round_prefer_floor"),
                         ("align_corners", "linear", "round_prefer_floor"),
                         ("half_pixel", "cubic", "round_prefer_floor"),
                         ("half_pixel", "nearest", "round_prefer_ceil")):
        attrs = {"mode": mode, "coordinate_transformation_mode": ct, "nearest_mode": nm}
        add((f"kiln_resize_opset11_{mode}_{ct}_scales", 11, "Resize", attrs, x4, [_f32(), _f32(1, 1, 2, 2)]))
        add((f"kiln_resize_opset13_{mode}_{ct}_sizes", 13, "Resize", attrs, x4, [None, None, _i64(2, 3, 7, 9)]))
    add(("kiln_resize_opset13_linear_down", 13, "Resize", {"mode": "linear"}, x4, [None, _f32(1, 1, 0.5, 0.7)]))
    # Dropout: inference is the identity at every opset.
    add(("kiln_dropout_opset7_ratio", 7, "Dropout", {"ratio": 0.3}, x3, []))
    add(("kiln_dropout_opset12_ratio_input", 12, "Dropout", {"seed": 3}, x3, [_f32(0.4).reshape([])]))
    add(("kiln_dropout_opset13_not_training", 13, "Dropout", {}, x3, [_f32(0.4).reshape([]), np.array(False)]))
    # BatchNormalization: spatial (opset 7), none (9), training_mode (14).
    bn = [_rand(3, seed=1), _rand(3, seed=2), _rand(3, seed=3), np.abs(_rand(3, seed=4)) + 0.1]
    add(("kiln_batchnorm_opset7_spatial", 7, "BatchNormalization", {"epsilon": 1e-3, "spatial": 1}, x4, bn))
    add(("kiln_batchnorm_opset9", 9, "BatchNormalization", {"momentum": 0.8}, x4, bn))
    add(("kiln_batchnorm_opset15_inference", 15, "BatchNormalization", {"training_mode": 0}, x4, bn))
    add(("kiln_batchnorm_opset9_2d", 9, "BatchNormalization", {}, _rand(4, 3), bn))
    # Pooling: ceil_mode, count_include_pad, asymmetric pads, auto_pad, dilations, storage_order.
    pools = [
        ("ceil", {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
        ("ceil_pads", {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 1], "ceil_mode": 1}),
        ("asym_pads", {"kernel_shape": [2, 3], "strides": [1, 2], "pads": [0, 2, 1, 0]}),
        ("big_pads", {"kernel_shape": [3, 3], "pads": [2, 1, 2, 2]}),
        ("same_upper", {"kernel_shape": [3, 2], "strides": [2, 2], "auto_pad": "SAME_UPPER"}),
        ("same_lower", {"kernel_shape": [2, 3], "strides": [2, 1], "auto_pad": "SAME_LOWER"}),
        ("valid", {"kernel_shape": [2, 3], "strides": [2, 2], "auto_pad": "VALID"}),
    ]
    for tag, attrs in pools:
        if "ceil_mode" not in attrs and "auto_pad" not in attrs and "big" not in tag:
            add((f"kiln_maxpool_opset8_{tag}", 8, "MaxPool", {**attrs, "storage_order": 1}, x4, []))
            add((f"kiln_averagepool_opset7_{tag}_incl", 7, "AveragePool", {**attrs, "count_include_pad": 1}, x4, []))
            add((f"kiln_averagepool_opset7_{tag}", 7, "AveragePool", attrs, x4, []))
        add((f"kiln_maxpool_opset12_{tag}", 12, "MaxPool", attrs, x4, []))
        add((f"kiln_averagepool_opset11_{tag}", 11, "AveragePool", attrs, x4, []))
        add((f"kiln_averagepool_opset11_{tag}_incl", 11, "AveragePool", {**attrs, "count_include_pad": 1}, x4, []))
    add(("kiln_maxpool_opset12_dilations_ceil", 12, "MaxPool",
         {"kernel_shape": [2, 2], "dilations": [2, 1], "strides": [1, 2], "ceil_mode": 1, "pads": [1, 0, 1, 1]},
         x4, []))
    add(("kiln_maxpool_opset12_1d", 12, "MaxPool", {"kernel_shape": [3], "strides": [2], "pads": [1, 0]}, x3, []))
    add(("kiln_averagepool_opset11_1d", 11, "AveragePool", {"kernel_shape": [2], "pads": [0, 1], "ceil_mode": 1},
         x3, []))
    add(("kiln_globalaveragepool_opset7_1d", 7, "GlobalAveragePool", {}, x3, []))
    add(("kiln_globalmaxpool_opset7_1d", 7, "GlobalMaxPool", {}, x3, []))
    # Conv / ConvTranspose: asymmetric pads, auto_pad, groups, 1-d.
    w = _rand(4, 3, 3, 2, seed=5)
    b = _rand(4, seed=6)
    add(("kiln_conv_opset7_asym_pads", 7, "Conv", {"pads": [1, 0, 0, 1], "strides": [2, 1]}, x4, [w, b]))
    add(("kiln_conv_opset11_same_upper", 11, "Conv", {"auto_pad": "SAME_UPPER", "strides": [2, 2]}, x4, [w, b]))
    add(("kiln_conv_opset11_same_lower", 11, "Conv", {"auto_pad": "SAME_LOWER", "strides": [1, 2]}, x4, [w]))
    add(("kiln_conv_opset11_valid", 11, "Conv", {"auto_pad": "VALID", "kernel_shape": [3, 2]}, x4, [w, b]))
    add(("kiln_conv_opset11_group", 11, "Conv", {"group": 3, "pads": [1, 1, 1, 1]}, x4, [_rand(6, 1, 3, 3, seed=7)]))
    add(("kiln_conv_opset11_1d", 11, "Conv", {"pads": [2, 1], "strides": [2]}, x3, [_rand(5, 3, 3, seed=8), _rand(5)]))
    wt = _rand(3, 2, 3, 3, seed=9)
    add(("kiln_convtranspose_opset11_pads", 11, "ConvTranspose", {"strides": [2, 2], "pads": [1, 0, 0, 1]}, x4,
         [wt, _rand(2, seed=10)]))
    add(("kiln_convtranspose_opset11_output_padding", 11, "ConvTranspose",
         {"strides": [2, 3], "output_padding": [1, 2], "pads": [1, 1, 1, 1]}, x4, [wt, _rand(2, seed=10)]))
    add(("kiln_convtranspose_opset11_group", 11, "ConvTranspose", {"group": 3, "strides": [2, 2]}, x4,
         [_rand(3, 1, 2, 2, seed=11)]))
    add(("kiln_convtranspose_opset11_1d", 11, "ConvTranspose", {"strides": [2], "dilations": [2]}, x3,
         [_rand(3, 2, 3, seed=12)]))
    add(("kiln_convtranspose_opset11_same_upper", 11, "ConvTranspose", {"strides": [2, 2], "auto_pad": "SAME_UPPER"},
         x4, [wt]))
    # Gemm: alpha, beta, transposes, each broadcastable C; C optional from opset 11.
    a = _rand(4, 5, seed=13)
    for opset in (7, 11, 13):
        for ta in (0, 1):
            for tb in (0, 1):
                bm = _rand(*((6, 5) if tb else (5, 6)), seed=14)
                x = a.T.copy() if ta else a
                for cname, c in (("scalar", _f32(0.5).reshape([])), ("row", _rand(6, seed=15)),
                                 ("row2d", _rand(1, 6, seed=16)), ("col", _rand(4, 1, seed=17)),
                                 ("full", _rand(4, 6, seed=18))):
                    attrs = {"alpha": 0.7, "beta": -1.3, "transA": ta, "transB": tb}
                    add((f"kiln_gemm_opset{opset}_ta{ta}_tb{tb}_{cname}", opset, "Gemm", attrs, x, [bm, c]))
        if opset >= 11:
            add((f"kiln_gemm_opset{opset}_no_c", opset, "Gemm", {"alpha": 2.0, "transB": 1}, a, [_rand(6, 5, seed=19)]))
    add(("kiln_gemm_opset13_linear", 13, "Gemm", {"transB": 1}, a, [_rand(6, 5, seed=20), _rand(6, seed=21)]))
    # MatMul: batched and broadcast N-d operands, 1-d ones.
    for tag, sa, sb in (("3d_2d", (2, 3, 4), (4, 5)), ("2d_3d", (3, 4), (2, 4, 5)),
                        ("bcast_4d", (2, 1, 3, 4), (5, 4, 6)),
                        ("batched", (2, 3, 4), (2, 4, 5)), ("1d_3d", (4,), (2, 4, 5)), ("3d_1d", (2, 3, 4), (4,)),
                        ("1d_1d", (4,), (4,)), ("bcast_both", (3, 1, 2, 4), (1, 5, 4, 3))):
        for opset in (7, 13):
            add((f"kiln_matmul_opset{opset}_{tag}", opset, "MatMul", {}, _rand(*sa, seed=22), [_rand(*sb, seed=23)]))
    # ReduceMean: axes an attribute before 18, an input after.
    add(("kiln_reducemean_opset13_axes", 13, "ReduceMean", {"axes": [2, 3], "keepdims": 1}, x4, []))
    add(("kiln_reducemean_opset11_all", 11, "ReduceMean", {"keepdims": 0}, x4, []))
    add(("kiln_reducemean_opset18_axes", 18, "ReduceMean", {"keepdims": 0}, x4, [_i64(-1, 1)]))
    add(("kiln_reducemean_opset18_noop", 18, "ReduceMean", {"noop_with_empty_axes": 1}, x4, []))
    # Squeeze / Unsqueeze: axes an attribute before 13, an input after.
    x1 = _rand(2, 1, 3, 1)
    add(("kiln_squeeze_opset11_axes", 11, "Squeeze", {"axes": [-1]}, x1, []))
    add(("kiln_squeeze_opset7_all", 7, "Squeeze", {}, x1, []))
    add(("kiln_squeeze_opset13_axes", 13, "Squeeze", {}, x1, [_i64(1, 3)]))
    add(("kiln_unsqueeze_opset11_axes", 11, "Unsqueeze", {"axes": [0, -1]}, x3, []))
    add(("kiln_unsqueeze_opset13_axes", 13, "Unsqueeze", {}, x3, [_i64(1, 4)]))
    # The rest at opset 7.
    add(("kiln_flatten_opset7_axis0", 7, "Flatten", {"axis": 0}, x4, []))
    add(("kiln_flatten_opset11_negative", 11, "Flatten", {"axis": -2}, x4, []))
    add(("kiln_concat_opset7", 7, "Concat", {"axis": 1}, x3, [_rand(2, 2, 4, seed=24)]))
    add(("kiln_lrn_opset7", 7, "LRN", {"size": 3, "alpha": 0.02, "beta": 0.6, "bias": 2.0}, x4, []))
    add(("kiln_transpose_opset7_default", 7, "Transpose", {}, x4, []))
    add(("kiln_sum_opset8_bcast", 8, "Sum", {}, x4, [_rand(5, 1, seed=25), _rand(3, 1, 1, seed=26)]))
    add(("kiln_add_opset7_bcast", 7, "Add", {}, x4, [_rand(3, 1, 6, seed=27)]))
    add(("kiln_div_opset7_bcast", 7, "Div", {}, x4, [np.abs(_rand(6, seed=28)) + 0.5]))
    add(("kiln_leakyrelu_opset7", 7, "LeakyRelu", {"alpha": 0.3}, x4, []))
    specs.extend(_recurrent_specs())
    return specs


def _recurrent_specs():
    """LSTM, GRU (PyTorch's linear_before_reset = 1) and RNN in the forms exporters write: opset 7
    (no layout) and later, both directions and reverse, B, sequence_lens, initial states, explicit default activations and RNN's Relu; and what kiln refuses by design (clip,
    input_forget, other activations)."""
    T, N, I, H = 5, 3, 4, 3
    x = _rand(T, N, I, seed=30)
    lens = np.array([5, 2, 4], dtype=np.int32)
    specs = []
    for op, G in (("LSTM", 4), ("GRU", 3), ("RNN", 1)):
        low = op.lower()
        base = {"hidden_size": H, **({"linear_before_reset": 1} if op == "GRU" else {})}
        outs = ["y", "y_h", "y_c"] if op == "LSTM" else ["y", "y_h"]

        def weights(D, seed):
            return [0.4 * _rand(D, G * H, I, seed=seed), 0.4 * _rand(D, G * H, H, seed=seed + 1),
                    0.3 * _rand(D, 2 * G * H, seed=seed + 2)]

        def states(D, seed):
            h = 0.5 * _rand(D, N, H, seed=seed)
            return [h, 0.5 * _rand(D, N, H, seed=seed + 1)] if op == "LSTM" else [h]

        w1, w2 = weights(1, 31), weights(2, 34)
        specs.append((f"kiln_{low}_opset7_states", 7, op, base, x, w1 + [None] + states(1, 37), outs))
        specs.append((f"kiln_{low}_opset13_bidir_seq_lens", 13, op, {**base, "direction": "bidirectional"}, x,
                      w2 + [lens], outs))
        specs.append((f"kiln_{low}_opset13_reverse_seq_lens_no_bias", 13, op, {**base, "direction": "reverse"}, x,
                      w1[:2] + [None, lens] + states(1, 39), outs))
        # (Layout 1 has no kiln case: onnxruntime's CPU kernels refuse it, "Batchwise recurrent
        # operations (layout == 1) are not supported"; the node tests' _batchwise cases check it.)
    acts = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"], "RNN": ["Relu"]}
    for op, G in (("LSTM", 4), ("GRU", 3), ("RNN", 1)):
        attrs = {"hidden_size": H, "direction": "bidirectional", "activations": acts[op] * 2,
                 **({"linear_before_reset": 1} if op == "GRU" else {})}
        w = [0.4 * _rand(2, G * H, I, seed=43), 0.4 * _rand(2, G * H, H, seed=44), 0.3 * _rand(2, 2 * G * H, seed=45)]
        specs.append((f"kiln_{op.lower()}_opset22_activations", 22, op, attrs, x, w, ["y", "y_h"]))
    # An all-zero P is no peephole: kiln takes it.
    w = [0.4 * _rand(1, 4 * H, I, seed=46), 0.4 * _rand(1, 4 * H, H, seed=47)]
    specs.append(("kiln_lstm_opset13_zero_peepholes", 13, "LSTM", {"hidden_size": H}, x,
                  w + [None, None, None, None, np.zeros((1, 3 * H), np.float32)], ["y"]))
    # Refused by design: cell clipping, coupled input and forget gates, other activations.
    specs.append(("kiln_lstm_opset13_clip", 13, "LSTM", {"hidden_size": H, "clip": 0.5}, x, w, ["y"]))
    specs.append(("kiln_lstm_opset13_input_forget", 13, "LSTM", {"hidden_size": H, "input_forget": 1}, x, w, ["y"]))
    specs.append(("kiln_gru_opset13_hardsigmoid", 13, "GRU",
                  {"hidden_size": H, "linear_before_reset": 1, "activations": ["HardSigmoid", "Tanh"]}, x,
                  [0.4 * _rand(1, 3 * H, I, seed=48), 0.4 * _rand(1, 3 * H, H, seed=49)], ["y"]))
    return specs


def _model(name, opset, op, attrs, x, others, outputs=("y",)):
    from onnx import TensorProto, helper, numpy_helper

    names = ["x"] + [f"in{i}" if v is not None else "" for i, v in enumerate(others, 1)]
    while names and names[-1] == "":
        names.pop()
    node = helper.make_node(op, names, list(outputs), name=name, **attrs)
    inits = [numpy_helper.from_array(np.asarray(v), f"in{i}") for i, v in enumerate(others, 1) if v is not None]
    graph = helper.make_graph([node], name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
                              initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def cases(ops):
    import onnxruntime as ort

    out, rejected = [], []
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.intra_op_num_threads = 1
    opts.log_severity_level = 4
    for name, opset, op, attrs, x, others, *outputs in _specs():
        if op not in ops:
            continue
        model = _model(name, opset, op, attrs, x, others, *outputs)
        try:
            sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
            ys = sess.run(None, {"x": x})
        except Exception as e:  # onnxruntime rejects the model itself: not a case
            rejected.append(f"{name}: {str(e).splitlines()[0][:150]}")
            continue
        out.append(types.SimpleNamespace(name=name, model=model, data_sets=[([x, *others], ys)], rtol=1e-3,
                                         atol=1e-5))
    for r in rejected:
        print("legacy.py: onnxruntime rejects", r)
    return out
