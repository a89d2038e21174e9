// The ONNX importer's spatial ops (io/onnx/onnx_ops.h): Conv, ConvTranspose, MaxPool,
// AveragePool, GlobalAveragePool, GlobalMaxPool on 1-d and 2-d inputs (3-d is refused), with
// ONNX's padding rules: explicit begin/end pads (asymmetric ones padded explicitly before kiln's
// symmetric op), auto_pad SAME_UPPER / SAME_LOWER / VALID from the input size at run time, and the
// pooling output sizes of the ONNX reference (ceil_mode drops a last window that starts in the end
// padding; average divisors with count_include_pad count the padding inside the padded border).
//   ctest --test-dir build -R onnx
#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/ops/conv.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/pool.h"
#include "engine/ops/reduce.h"
#include "engine/ops/shape.h"
#include "io/onnx/onnx_ops.h"

namespace kiln::onnx::detail {
namespace {

using ops::ConvHW;

constexpr int64_t kMaxWindow = int64_t(1) << 24;

// The attributes Conv, ConvTranspose and the pools share, read at import.
struct Window {
  std::string auto_pad;
  std::vector<int64_t> kernel, strides, dilations, pads;  // empty: not given (defaults at run time)
};

Window read_window(NodeCtx& c, bool dilations) {
  Window w;
  w.auto_pad = c.s("auto_pad", "NOTSET");
  if (w.auto_pad != "NOTSET" && w.auto_pad != "SAME_UPPER" && w.auto_pad != "SAME_LOWER" && w.auto_pad != "VALID")
    c.refuse("attribute 'auto_pad' = '", w.auto_pad, "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
  w.kernel = c.ints("kernel_shape", {});
  w.strides = c.ints("strides", {});
  if (dilations) w.dilations = c.ints("dilations", {});
  w.pads = c.ints("pads", {});
  bool any_pad = false;
  for (int64_t p : w.pads) any_pad |= p != 0;
  if (w.auto_pad != "NOTSET" && any_pad) c.refuse("attribute 'pads' with auto_pad ", w.auto_pad, " is not defined");
  for (int64_t p : w.pads)
    if (p < 0) c.refuse("attribute 'pads' has a negative value");
  // Sizes from the file: bounded so that the window arithmetic below cannot overflow.
  for (const auto* v : {&w.kernel, &w.strides, &w.dilations, &w.pads})
    for (int64_t x : *v)
      if (x > kMaxWindow) c.refuse("a window attribute value ", x, " is beyond kiln's bound ", kMaxWindow);
  for (int64_t s : w.strides)
    if (s <= 0) c.refuse("attribute 'strides' has a non-positive value");
  for (int64_t d : w.dilations)
    if (d <= 0) c.refuse("attribute 'dilations' has a non-positive value");
  return w;
}

// The window's values for r spatial dims, defaults filled and sizes checked.
struct Dims {
  std::vector<int64_t> k, s, d, head, tail;
};
Dims dims_for(const NodeCtx& c, const Window& w, const std::vector<int64_t>& kernel) {
  const size_t r = kernel.size();
  auto fill = [&](const std::vector<int64_t>& v, const char* name) {
    if (v.empty()) return std::vector<int64_t>(r, 1);
    if (v.size() != r) c.refuse("attribute '", name, "' has ", v.size(), " values for ", r, " spatial dims");
    return v;
  };
  Dims d;
  d.k = kernel;
  d.s = fill(w.strides, "strides");
  d.d = fill(w.dilations, "dilations");
  if (!w.pads.empty() && w.pads.size() != 2 * r)
    c.refuse("attribute 'pads' has ", w.pads.size(), " values for ", r, " spatial dims");
  d.head.assign(r, 0);
  d.tail.assign(r, 0);
  for (size_t i = 0; i < r && !w.pads.empty(); ++i) d.head[i] = w.pads[i], d.tail[i] = w.pads[r + i];
  return d;
}

// ops::pad's list ({w_begin, w_end, h_begin, h_end}) from per-dim begin/end pads of a 4-d input.
std::vector<int64_t> pad_list(const std::vector<int64_t>& b, const std::vector<int64_t>& e) {
  return {b[1], e[1], b[0], e[0]};
}

// 1-d windows run as 2-d ones over a height of 1.
void to_2d(Dims& d) {
  d.k.insert(d.k.begin(), 1);
  d.s.insert(d.s.begin(), 1);
  d.d.insert(d.d.begin(), 1);
  d.head.insert(d.head.begin(), 0);
  d.tail.insert(d.tail.begin(), 0);
}

void check_rank(const NodeCtx& c, const Tensor& x, size_t r, const char* what) {
  if (r < 1 || r > 2) c.refuse(r, "-d ", what, " is not implemented (kiln maps 1-d and 2-d)");
  if (x.dim() != int64_t(r) + 2)
    c.refuse("input ", shape_str(x.sizes()), " does not have ", r + 2, " dims for a ", r, "-d ", what);
}

}  // namespace

OpFn conv_op(NodeCtx& c, bool relu) {
  const Window w = read_window(c, true);
  const int64_t group = c.i("group", 1);
  if (group <= 0) c.refuse("attribute 'group' = ", group);
  return [&c, w, group, relu](const std::vector<Tensor>& in) {
    Tensor x = in[0], wt = in[1];
    const size_t r = size_t(std::max<int64_t>(wt.dim() - 2, 0));
    check_rank(c, x, r, "convolution");
    std::vector<int64_t> kernel(wt.sizes().begin() + 2, wt.sizes().end());
    if (!w.kernel.empty() && w.kernel != kernel)
      c.refuse("attribute 'kernel_shape' ", shape_str(w.kernel), " differs from the weight's ", shape_str(kernel));
    Dims d = dims_for(c, w, kernel);
    for (size_t i = 0; i < r; ++i) {
      if (w.auto_pad == "NOTSET" || w.auto_pad == "VALID") continue;
      const int64_t n = x.size(int64_t(2 + i)), keff = (d.k[i] - 1) * d.d[i] + 1;
      const int64_t out = (n + d.s[i] - 1) / d.s[i];
      const int64_t total = std::max<int64_t>(0, (out - 1) * d.s[i] + keff - n);
      d.head[i] = w.auto_pad == "SAME_LOWER" ? (total + 1) / 2 : total / 2;
      d.tail[i] = total - d.head[i];
    }
    if (r == 1) x = x.unsqueeze(2), wt = wt.unsqueeze(2), to_2d(d);
    // The symmetric part of the padding goes to conv2d, the rest is padded explicitly.
    std::vector<int64_t> sym(2), eb(2), ee(2);
    bool extra = false;
    for (size_t i = 0; i < 2; ++i) {
      sym[i] = std::min(d.head[i], d.tail[i]);
      eb[i] = d.head[i] - sym[i], ee[i] = d.tail[i] - sym[i];
      extra |= eb[i] || ee[i];
    }
    if (extra) x = ops::pad(x, pad_list(eb, ee));
    Tensor y = (relu ? ops::conv2d_relu : ops::conv2d)(x, wt, in.size() > 2 ? in[2] : Tensor(), ConvHW(d.s[0], d.s[1]),
                                                      ConvHW(sym[0], sym[1]), ConvHW(d.d[0], d.d[1]), group);
    return r == 1 ? y.squeeze(2) : y;
  };
}

OpFn conv_transpose_op(NodeCtx& c) {
  const Window w = read_window(c, true);
  const int64_t group = c.i("group", 1);
  const std::vector<int64_t> out_pad = c.ints("output_padding", {}), out_shape = c.ints("output_shape", {});
  if (group <= 0) c.refuse("attribute 'group' = ", group);
  for (const auto* v : {&out_pad, &out_shape})
    for (int64_t x : *v)
      if (x < 0 || x > kMaxWindow) c.refuse("attribute value ", x, " of output_padding / output_shape is out of range");
  if (!out_shape.empty() && !w.pads.empty())
    c.refuse("attributes 'output_shape' and 'pads' together are not implemented (ONNX ignores pads; kiln refuses)");
  return [&c, w, group, out_pad, out_shape](const std::vector<Tensor>& in) {
    Tensor x = in[0], wt = in[1];
    const size_t r = size_t(std::max<int64_t>(wt.dim() - 2, 0));
    check_rank(c, x, r, "transposed convolution");
    std::vector<int64_t> kernel(wt.sizes().begin() + 2, wt.sizes().end());
    if (!w.kernel.empty() && w.kernel != kernel)
      c.refuse("attribute 'kernel_shape' ", shape_str(w.kernel), " differs from the weight's ", shape_str(kernel));
    Dims d = dims_for(c, w, kernel);
    std::vector<int64_t> op = out_pad.empty() ? std::vector<int64_t>(r, 0) : out_pad;
    if (op.size() != r) c.refuse("attribute 'output_padding' has ", op.size(), " values for ", r, " spatial dims");
    std::vector<int64_t> want = out_shape;
    if (want.size() == r + 2) want.erase(want.begin(), want.begin() + 2);
    if (!want.empty() && want.size() != r)
      c.refuse("attribute 'output_shape' has ", out_shape.size(), " values for ", r, " spatial dims");
    for (size_t i = 0; i < r; ++i) {
      const int64_t n = x.size(int64_t(2 + i));
      const int64_t full = d.s[i] * (n - 1) + op[i] + (d.k[i] - 1) * d.d[i] + 1;
      int64_t target = -1;
      if (!want.empty()) target = want[i];
      else if (w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER") target = n * d.s[i];
      if (target < 0) continue;
      // The padding that gives the target size: ONNX's spec splits it by auto_pad (SAME_UPPER:
      // the smaller half first; otherwise the larger), the reference puts it all at the end under
      // NOTSET and floors negative halves where onnxruntime truncates. kiln takes the cases where
      // they agree and refuses the others.
      const int64_t total = full - target;
      if (total < 0 || (w.auto_pad == "NOTSET" && total != 0))
        c.refuse("output size ", target, " from a full size of ", full, " under auto_pad ", w.auto_pad,
                 " is not implemented (ONNX's spec, reference and onnxruntime place that padding differently)");
      d.head[i] = w.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      d.tail[i] = total - d.head[i];
    }
    if (r == 1) x = x.unsqueeze(2), wt = wt.unsqueeze(2), to_2d(d), op.insert(op.begin(), 0);
    // The full transposed convolution, then ONNX's crop (pads) and extension (output_padding,
    // which adds positions no input reaches: the bias alone) in one ops::pad, then the bias.
    Tensor y = ops::conv_transpose2d(x, wt, Tensor(), ConvHW(d.s[0], d.s[1]), 0, 0, ConvHW(d.d[0], d.d[1]), group);
    const std::vector<int64_t> crop = {-d.head[1], op[1] - d.tail[1], -d.head[0], op[0] - d.tail[0]};
    if (crop != std::vector<int64_t>(4, 0)) {
      if (y.size(2) + crop[2] + crop[3] <= 0 || y.size(3) + crop[0] + crop[1] <= 0)
        c.refuse("pads leave an empty output");
      y = ops::pad(y, crop);
    }
    if (in.size() > 2 && in[2].defined()) y = ops::add(y, in[2].reshape({1, in[2].numel(), 1, 1}));
    return r == 1 ? y.squeeze(2) : y;
  };
}

OpFn pool_op(NodeCtx& c) {
  const bool max = c.node.op_type == "MaxPool";
  const bool has_ceil = c.version >= 10;
  const bool has_dil = max ? c.version >= 10 : c.version >= 19;
  const Window w = read_window(c, has_dil);
  const bool ceil = has_ceil && c.i("ceil_mode", 0) != 0;
  const bool include_pad = !max && c.i("count_include_pad", 0) != 0;
  // storage_order only orders the Indices output, which kiln refuses (NodeCtx: outputs).
  if (max && c.version >= 8) c.ignore("storage_order");
  if (w.kernel.empty()) c.refuse("attribute 'kernel_shape' is required");
  const size_t r = w.kernel.size();
  if (r < 1 || r > 2) c.refuse(r, "-d pooling is not implemented (kiln maps 1-d and 2-d)");
  Dims d0 = dims_for(c, w, w.kernel);
  for (int64_t k : w.kernel)
    if (k <= 0) c.refuse("attribute 'kernel_shape' has a non-positive value");
  bool dilated = false;
  for (int64_t v : d0.d) dilated |= v != 1;
  if (!max && dilated) c.refuse("attribute 'dilations' other than 1 is not implemented for AveragePool");
  if (w.auto_pad != "NOTSET" && (ceil || dilated))
    c.refuse("auto_pad ", w.auto_pad, " with ceil_mode or dilations is not implemented");
  return [&c, w, d0, r, max, ceil, include_pad](const std::vector<Tensor>& in) {
    Tensor x = in[0];
    check_rank(c, x, r, "pooling");
    Dims d = d0;
    std::vector<int64_t> out(r);
    for (size_t i = 0; i < r; ++i) {
      const int64_t n = x.size(int64_t(2 + i));
      if (w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER") {
        // The ONNX reference: out = ceil(n / s), total padding (out - 1) s + k - n.
        const int64_t o = (n - 1) / d.s[i] + 1, total = (o - 1) * d.s[i] + d.k[i] - n;
        if (total < 0) c.refuse("auto_pad ", w.auto_pad, " would pad by ", total, " (kernel smaller than stride)");
        d.head[i] = w.auto_pad == "SAME_LOWER" ? total - total / 2 : total / 2;
        d.tail[i] = total - d.head[i];
      }
      const int64_t keff = (d.k[i] - 1) * d.d[i] + 1, span = n + d.head[i] + d.tail[i] - keff;
      // A window all in the padding has no value in the reference (and onnxruntime refuses it).
      if (d.head[i] >= keff || d.tail[i] >= keff)
        c.refuse("pads ", d.head[i], ", ", d.tail[i], " are not smaller than the window ", keff);
      if (span < 0) c.refuse("the window ", keff, " is larger than the padded input ", n + d.head[i] + d.tail[i]);
      out[i] = (ceil ? (span + d.s[i] - 1) / d.s[i] : span / d.s[i]) + 1;
      if (ceil && (out[i] - 1) * d.s[i] >= n + d.head[i]) --out[i];
    }
    if (r == 1) x = x.unsqueeze(2), to_2d(d);
    // kiln pads symmetrically up to half the kernel; the rest goes in explicitly (-inf for max,
    // zeros for average). kiln's ceil-mode rule then keeps at least ONNX's windows, the surplus
    // is cut off below; the average divisor clips at the padded border either way.
    std::vector<int64_t> sym(2), eb(2), ee(2);
    bool extra = false;
    for (size_t i = 0; i < 2; ++i) {
      sym[i] = std::min({d.head[i], d.tail[i], d.k[i] / 2});
      eb[i] = d.head[i] - sym[i], ee[i] = d.tail[i] - sym[i];
      extra |= eb[i] || ee[i];
    }
    const std::array<int64_t, 2> k = {d.k[0], d.k[1]}, s = {d.s[0], d.s[1]}, p = {sym[0], sym[1]};
    Tensor y;
    if (max) {
      if (extra) x = ops::pad(x, pad_list(eb, ee), PadMode::constant, -std::numeric_limits<double>::infinity());
      y = ops::max_pool2d(x, k, s, p, {d.d[0], d.d[1]}, ceil);
    } else if (!extra || include_pad) {
      if (extra) x = ops::pad(x, pad_list(eb, ee));
      y = ops::avg_pool2d(x, k, s, p, ceil, include_pad);
    } else {
      // Padding excluded from the divisor, some of it explicit: the sum over the window's input
      // values divided by their count, both as averages over the same windows.
      const Tensor num = ops::avg_pool2d(ops::pad(x, pad_list(eb, ee)), k, s, p, ceil, true);
      const Tensor ones_in = ones(x.sizes(), TensorOptions(x.dtype()).with_device(x.device()));
      const Tensor den = ops::avg_pool2d(ops::pad(ones_in, pad_list(eb, ee)), k, s, p, ceil, true);
      y = ops::div(num, den);
    }
    if (r == 1) y = y.squeeze(2);
    for (size_t i = 0; i < r; ++i) {
      const int64_t dim = int64_t(2 + i);
      if (y.size(dim) < out[i])
        c.refuse("internal: pooled size ", y.size(dim), " is smaller than ONNX's ", out[i]);
      if (y.size(dim) > out[i]) y = y.slice(dim, 0, out[i]);
    }
    // Dense in the input's memory format: a channels-last network stays channels-last (NCHW
    // here cost every later convolution a reorder: GoogLeNet's imported graph ran at 0.75 of the
    // zoo net's speed).
    return y.dim() == 4 && in[0].dim() == 4 ? y.contiguous(in[0].suggest_memory_format()) : y.contiguous();
  };
}

OpFn global_pool_op(NodeCtx& c) {
  const bool max = c.node.op_type == "GlobalMaxPool";
  return [&c, max](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];
    if (x.dim() < 3) c.refuse("input ", shape_str(x.sizes()), " has no spatial dims");
    if (!max) {
      std::vector<int64_t> dims;
      for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
      return ops::mean(x, dims, true);
    }
    Tensor y = x;
    for (int64_t d = 2; d < x.dim(); ++d) y = ops::max(y, d, true).values;
    return y;
  };
}

}  // namespace kiln::onnx::detail
