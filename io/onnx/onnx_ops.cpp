// The ONNX importer's ops without spatial structure (io/onnx/onnx_ops.h): elementwise ops,
// MatMul (numpy.matmul: batched and broadcast N-d operands), Gemm (alpha, beta, transposes, C
// broadcast one way), Softmax/LogSoftmax by opset, BatchNormalization, Dropout, Reshape,
// ReduceMean, Squeeze/Unsqueeze, LRN, Concat, Flatten, Transpose; build_op dispatches every op.
//   ctest --test-dir build -R onnx
#include <algorithm>

#include "engine/checked_size.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/linalg.h"
#include "engine/ops/norm.h"
#include "engine/ops/reduce.h"
#include "engine/ops/shape.h"
#include "engine/ops/softmax.h"
#include "io/onnx/onnx_ops.h"

namespace kiln::onnx::detail {
namespace {


// ONNX MatMul (numpy.matmul): 1-d operands get a dim of 1 prepended (a) or appended (b) and
// removed after; the dims before the last two broadcast.
Tensor matmul_nd(const NodeCtx& c, Tensor a, Tensor b) {
  if (a.dim() == 0 || b.dim() == 0) c.refuse("MatMul of a 0-d tensor is not defined");
  const bool vec_a = a.dim() == 1, vec_b = b.dim() == 1;
  if (vec_a) a = a.unsqueeze(0);
  if (vec_b) b = b.unsqueeze(1);
  const int64_t m = a.size(-2), k = a.size(-1), k2 = b.size(-2), n = b.size(-1);
  if (k != k2) c.refuse("MatMul operands ", shape_str(a.sizes()), " and ", shape_str(b.sizes()), " do not chain");
  Shape ba(a.sizes().begin(), a.sizes().end() - 2), bb(b.sizes().begin(), b.sizes().end() - 2);
  const size_t r = std::max(ba.size(), bb.size());
  ba.insert(ba.begin(), r - ba.size(), 1);
  bb.insert(bb.begin(), r - bb.size(), 1);
  Shape batch(r);
  for (size_t d = 0; d < r; ++d) {
    if (ba[d] != bb[d] && ba[d] != 1 && bb[d] != 1)
      c.refuse("MatMul batch dims of ", shape_str(a.sizes()), " and ", shape_str(b.sizes()), " do not broadcast");
    batch[d] = ba[d] == 1 ? bb[d] : ba[d];
  }
  const int64_t nb = shape_numel(batch);
  const bool b_shared = shape_numel(bb) == 1;  // one b for every batch: a's rows go to one GEMM
  Tensor y;
  if (b_shared) {
    Shape as = batch;
    as.push_back(m), as.push_back(k);
    y = ops::matmul(a.expand(as).reshape({nb * m, k}), b.reshape({k, n}));
  } else {
    Shape as = batch, bs = batch;
    as.push_back(m), as.push_back(k), bs.push_back(k), bs.push_back(n);
    y = ops::matmul(a.expand(as).reshape({nb, m, k}), b.expand(bs).reshape({nb, k, n}));
  }
  Shape out = batch;
  if (!vec_a) out.push_back(m);
  if (!vec_b) out.push_back(n);
  return y.reshape(out);
}

// Softmax / LogSoftmax before opset 13: the input taken as 2-d [prod(dims < axis), prod(rest)]
// (axis default 1) and normalised over the second dim; from 13 over `axis` alone (default -1).
OpFn softmax_op(NodeCtx& c) {
  const bool log = c.node.op_type == "LogSoftmax";
  const bool coerce = c.version < 13;
  const int64_t axis = c.i("axis", coerce ? 1 : -1);
  return [&c, log, coerce, axis](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];
    const int64_t r = x.dim();
    if (!coerce) {
      const int64_t a = norm_axis(c, axis, r, "axis");
      return log ? ops::log_softmax(x, a) : ops::softmax(x, a);
    }
    if (axis < -r || axis > r) c.refuse("axis ", axis, " is out of range for a ", r, "-d input");
    const int64_t a = axis < 0 ? axis + r : axis;
    int64_t outer = 1;
    for (int64_t d = 0; d < a; ++d) outer *= x.size(d);
    const Tensor x2 = x.reshape({outer, x.numel() / std::max<int64_t>(outer, 1)});
    return (log ? ops::log_softmax(x2, 1) : ops::softmax(x2, 1)).reshape(x.sizes());
  };
}

OpFn gemm_op(NodeCtx& c) {
  const double alpha = c.f("alpha", 1.0), beta = c.f("beta", 1.0);
  const bool ta = c.i("transA", 0) != 0, tb = c.i("transB", 0) != 0;
  return [&c, alpha, beta, ta, tb](const std::vector<Tensor>& in) {
    const Tensor &a = in[0], &b = in[1];
    if (a.dim() != 2 || b.dim() != 2)
      c.refuse("Gemm takes 2-d A and B, got ", shape_str(a.sizes()), " and ", shape_str(b.sizes()));
    const Tensor& cc = in.size() > 2 ? in[2] : Tensor();
    const int64_t n = tb ? b.size(0) : b.size(1);
    // The common form (PyTorch's Linear): one fused GEMM with the bias.
    if (alpha == 1.0 && beta == 1.0 && !ta && cc.defined() && cc.numel() == n && cc.dim() >= 1 &&
        cc.size(-1) == n && cc.dim() <= 2)
      return ops::linear(a, tb ? b : b.t(), cc.reshape({n}));
    Tensor y = ops::matmul(ta ? a.t() : a, tb ? b.t() : b);
    if (alpha != 1.0) y = ops::mul(y, alpha);
    if (cc.defined()) {
      if (cc.dim() > 2) c.refuse("C ", shape_str(cc.sizes()), " has more than 2 dims");
      const Shape prod = y.sizes();
      y = ops::add(y, beta == 1.0 ? cc : ops::mul(cc, beta));
      // C broadcasts to the product's [M, N] one way only.
      if (y.sizes() != prod) c.refuse("C ", shape_str(cc.sizes()), " does not broadcast to ", shape_str(prod));
    }
    return y;
  };
}

OpFn batch_norm_op(NodeCtx& c) {
  const double eps = c.f("epsilon", 1e-5);
  c.ignore("momentum");  // updates running statistics in training only
  if (c.version < 9 && c.i("spatial", 1) != 1)
    c.refuse("attribute 'spatial' = 0 (per-activation statistics) is not implemented");
  if (c.version >= 14 && c.i("training_mode", 0) != 0)
    c.refuse("attribute 'training_mode' = 1 is not implemented (export the model in eval mode)");
  return [&c, eps](const std::vector<Tensor>& in) {
    if (in[0].dim() < 2) c.refuse("input ", shape_str(in[0].sizes()), " has fewer than 2 dims");
    return ops::batch_norm(in[0], in[1], in[2], in[3].detach(), in[4].detach(), false, 0.1, eps);
  };
}

OpFn dropout_op(NodeCtx& c) {
  // Inference: the output is the input. The ratio (attribute before opset 12, an input after) and
  // the seed only matter in training.
  if (c.version < 12) {
    c.ignore("ratio");
  } else {
    c.ignore("seed");
    if (c.has_input(2)) {
      const std::vector<int64_t> t = c.const_ints(2, "training_mode");
      if (t.size() != 1 || t[0] != 0) c.refuse("training_mode true is not implemented (kiln runs inference)");
    }
  }
  return [](const std::vector<Tensor>& in) { return in[0]; };
}

OpFn reshape_op(NodeCtx& c) {
  const std::vector<int64_t> shape = c.const_ints(1, "shape");
  const bool allowzero = c.version >= 14 && c.i("allowzero", 0) != 0;
  if (std::count(shape.begin(), shape.end(), -1) > 1) c.refuse("shape has more than one -1");
  for (int64_t s : shape)
    if (s < -1) c.refuse("shape has the size ", s);
  if (allowzero && std::count(shape.begin(), shape.end(), 0) > 0)
    c.refuse("allowzero = 1 with a 0 in the shape (an empty tensor) is not implemented");
  return [&c, shape](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];
    Shape s = shape;
    int64_t known = 1, infer = -1;
    for (size_t d = 0; d < s.size(); ++d) {
      if (s[d] == 0) {
        if (int64_t(d) >= x.dim()) c.refuse("shape copies dim ", d, " of a ", x.dim(), "-d input");
        s[d] = x.size(int64_t(d));
      }
      if (s[d] == -1) infer = int64_t(d);
      else known = int64_t(checked_mul(uint64_t(known), uint64_t(s[d]), "onnx import: Reshape's shape"));
    }
    if (infer >= 0) {
      if (known == 0 || x.numel() % known != 0)
        c.refuse("cannot reshape ", shape_str(x.sizes()), " to ", shape_str(shape));
      s[size_t(infer)] = x.numel() / known;
    }
    if (shape_numel(s) != x.numel()) c.refuse("cannot reshape ", shape_str(x.sizes()), " to ", shape_str(shape));
    return x.reshape(s);
  };
}

// ReduceMean: axes an attribute before opset 18, an input after (empty: every dim, or none with
// noop_with_empty_axes).
OpFn reduce_mean_op(NodeCtx& c) {
  std::vector<int64_t> axes;
  bool noop = false;
  if (c.version < 18) {
    axes = c.ints("axes", {});
  } else {
    if (c.has_input(1)) axes = c.const_ints(1, "axes");
    noop = c.i("noop_with_empty_axes", 0) != 0;
  }
  const bool keep = c.i("keepdims", 1) != 0;
  return [&c, axes, noop, keep](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];
    if (axes.empty() && noop) return x;
    std::vector<int64_t> dims = axes;
    if (dims.empty())
      for (int64_t d = 0; d < x.dim(); ++d) dims.push_back(d);
    std::vector<bool> seen(size_t(x.dim()), false);
    for (int64_t& d : dims) {
      d = norm_axis(c, d, x.dim(), "axis");
      if (seen[size_t(d)]) c.refuse("axis ", d, " is given twice");
      seen[size_t(d)] = true;
    }
    if (x.dim() == 0) return x;
    return ops::mean(x, dims, keep);
  };
}

// Squeeze / Unsqueeze: axes an attribute before opset 13, an input after. Squeeze without axes
// drops every dim of size 1; Unsqueeze's axes index the output.
OpFn squeeze_op(NodeCtx& c) {
  const bool un = c.node.op_type == "Unsqueeze";
  std::vector<int64_t> axes;
  if (c.version < 13) axes = c.ints("axes", {});
  else if (c.has_input(1)) axes = c.const_ints(1, "axes");
  if (un && axes.empty()) c.refuse("axes are required");
  return [&c, un, axes](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];
    const int64_t r = x.dim() + (un ? int64_t(axes.size()) : 0);
    std::vector<bool> pick(size_t(r), false);
    for (int64_t a : axes) {
      const int64_t d = norm_axis(c, a, r, "axis");
      if (pick[size_t(d)]) c.refuse("axis ", d, " is given twice");
      pick[size_t(d)] = true;
    }
    Shape s;
    if (un) {
      for (int64_t d = 0, k = 0; d < r; ++d) s.push_back(pick[size_t(d)] ? 1 : x.size(k++));
    } else {
      for (int64_t d = 0; d < r; ++d) {
        const bool drop = axes.empty() ? x.size(d) == 1 : bool(pick[size_t(d)]);
        if (drop && x.size(d) != 1) c.refuse("dim ", d, " of ", shape_str(x.sizes()), " is not 1");
        if (!drop) s.push_back(x.size(d));
      }
    }
    return x.reshape(s);
  };
}

}  // namespace

OpFn build_op(NodeCtx& c) {
  const std::string& op = c.node.op_type;
  if (op == "Add") return [](const std::vector<Tensor>& in) { return ops::add(in[0], in[1]); };
  if (op == "Sub") return [](const std::vector<Tensor>& in) { return ops::sub(in[0], in[1]); };
  if (op == "Mul") return [](const std::vector<Tensor>& in) { return ops::mul(in[0], in[1]); };
  if (op == "Div") return [](const std::vector<Tensor>& in) { return ops::div(in[0], in[1]); };
  if (op == "Sum")
    return [](const std::vector<Tensor>& in) {
      Tensor y = in[0];
      for (size_t k = 1; k < in.size(); ++k) y = ops::add(y, in[k]);
      return y;
    };
  if (op == "Relu") return [](const std::vector<Tensor>& in) { return ops::relu(in[0]); };
  if (op == "Sigmoid") return [](const std::vector<Tensor>& in) { return ops::sigmoid(in[0]); };
  if (op == "Tanh") return [](const std::vector<Tensor>& in) { return ops::tanh(in[0]); };
  if (op == "Identity") return [](const std::vector<Tensor>& in) { return in[0]; };
  if (op == "LeakyRelu") {
    const double alpha = c.f("alpha", 0.01);
    return [alpha](const std::vector<Tensor>& in) { return ops::leaky_relu(in[0], alpha); };
  }
  if (op == "Softmax" || op == "LogSoftmax") return softmax_op(c);
  if (op == "Gemm") return gemm_op(c);
  if (op == "MatMul") return [&c](const std::vector<Tensor>& in) { return matmul_nd(c, in[0], in[1]); };
  if (op == "BatchNormalization") return batch_norm_op(c);
  if (op == "Dropout") return dropout_op(c);
  if (op == "Reshape") return reshape_op(c);
  if (op == "ReduceMean") return reduce_mean_op(c);
  if (op == "Squeeze" || op == "Unsqueeze") return squeeze_op(c);
  if (op == "LRN") {
    const int64_t size = c.i("size", 0);
    const double alpha = c.f("alpha", 1e-4), beta = c.f("beta", 0.75), bias = c.f("bias", 1.0);
    // ONNX sums channels [c - floor((size-1)/2), c + ceil((size-1)/2)], kiln (PyTorch)
    // [c - size/2, c + (size-1)/2]: the same window for odd sizes only.
    if (size <= 0 || size % 2 == 0) c.refuse("attribute 'size' = ", size, ": kiln's LRN window is odd-sized");
    return [&c, size, alpha, beta, bias](const std::vector<Tensor>& in) {
      if (in[0].dim() != 4) c.refuse("LRN of a ", in[0].dim(), "-d input is not implemented (4-d only)");
      return ops::local_response_norm(in[0], size, alpha, beta, bias);
    };
  }
  if (op == "Concat") {
    if (!c.has("axis")) c.refuse("attribute 'axis' is required");
    const int64_t axis = c.i("axis", 0);
    return [&c, axis](const std::vector<Tensor>& in) {
      return ops::cat(in, norm_axis(c, axis, in[0].dim(), "axis"));
    };
  }
  if (op == "Flatten") {
    const int64_t axis = c.i("axis", 1);
    return [&c, axis](const std::vector<Tensor>& in) {
      const Tensor& x = in[0];
      if (axis < -x.dim() || axis > x.dim()) c.refuse("axis ", axis, " is out of range for a ", x.dim(), "-d input");
      const int64_t a = axis < 0 ? axis + x.dim() : axis;
      int64_t outer = 1;
      for (int64_t d = 0; d < a; ++d) outer *= x.size(d);
      return x.reshape({outer, outer == 0 ? 0 : x.numel() / outer});
    };
  }
  if (op == "Transpose") {
    const std::vector<int64_t> perm = c.ints("perm", {});
    return [&c, perm](const std::vector<Tensor>& in) {
      const Tensor& x = in[0];
      std::vector<int64_t> p = perm;
      if (p.empty())
        for (int64_t d = x.dim() - 1; d >= 0; --d) p.push_back(d);
      std::vector<int64_t> sorted = p;
      std::sort(sorted.begin(), sorted.end());
      for (size_t d = 0; d < sorted.size(); ++d)
        if (sorted[d] != int64_t(d) || int64_t(p.size()) != x.dim())
          c.refuse("perm is not a permutation of the ", x.dim(), " dims");
      return x.permute(p).contiguous();
    };
  }
  if (op == "GlobalAveragePool" || op == "GlobalMaxPool") return global_pool_op(c);
  if (op == "Conv") return conv_op(c);
  if (op == "ConvTranspose") return conv_transpose_op(c);
  if (op == "MaxPool" || op == "AveragePool") return pool_op(c);
  if (op == "Pad") return pad_op(c);
  if (op == "Slice") return slice_op(c);
  if (op == "Resize" || op == "Upsample") return resize_op(c);
  c.refuse("op not mapped");
}

}  // namespace kiln::onnx::detail
