// Pooling and LRN op wrappers: argument checks (PyTorch's, with the op and shapes in the message),
// output allocation, dispatch to the pool kernels, and autograd. Kernel registration at the end.
//   tests: ctest --test-dir build -R pool
#include "engine/ops/pool.h"

#include <sstream>

#include "engine/autograd.h"
#include "engine/dispatch.h"
#include "engine/graph_op.h"
#include "kernels/common/pool.h"

namespace kiln {
namespace {

using Pair = std::array<int64_t, 2>;
using ops::ValuesIndices;

std::string pair_str(Pair p) {
  std::ostringstream os;
  os << "[" << p[0] << ", " << p[1] << "]";
  return os.str();
}


void check_input(const Tensor& x, const char* op) {
  KILN_CHECK(x.defined(), op, ": undefined input tensor");
  KILN_CHECK(x.dim() == 3 || x.dim() == 4, op, ": expected a 3-d (C, H, W) or 4-d (N, C, H, W) input, got ",
             shape_str(x.sizes()));
  KILN_CHECK(x.is_floating_point(), op, ": needs a floating-point input, got ", x.dtype(), " ", shape_str(x.sizes()));
  KILN_CHECK(x.size(-1) > 0 && x.size(-2) > 0, op, ": input ", shape_str(x.sizes()), " has an empty spatial dim");
}

// Fills n, c, ih, iw from a 4-d input.
template <class Desc>
void fill_dims(Desc& d, const Tensor& x) {
  d.dtype = x.dtype();
  d.n = x.size(0);
  d.c = x.size(1);
  d.ih = x.size(2);
  d.iw = x.size(3);
}

Tensor empty_for(const Shape& s, const Tensor& like, DType t, MemoryFormat f = MemoryFormat::contiguous) {
  return empty(s, TensorOptions(t).with_device(like.device()), f);
}

PoolDesc make_pool_desc(const Tensor& x, PoolAlg alg, Pair kernel, Pair stride, Pair padding, Pair dilation,
                        bool ceil_mode, const char* op) {
  if (stride[0] == 0 && stride[1] == 0) stride = kernel;
  const std::string where = std::string(" (input ") + shape_str(x.sizes()) + ", kernel " + pair_str(kernel) +
                            ", stride " + pair_str(stride) + ", padding " + pair_str(padding) +
                            (alg == PoolAlg::max ? ", dilation " + pair_str(dilation) : std::string()) + ")";
  KILN_CHECK(kernel[0] > 0 && kernel[1] > 0, op, ": kernel size must be positive", where);
  KILN_CHECK(stride[0] > 0 && stride[1] > 0, op, ": stride must be positive", where);
  KILN_CHECK(dilation[0] > 0 && dilation[1] > 0, op, ": dilation must be positive", where);
  KILN_CHECK(padding[0] >= 0 && padding[1] >= 0, op, ": padding must be non-negative", where);
  KILN_CHECK(padding[0] <= kernel[0] / 2 && padding[1] <= kernel[1] / 2, op,
             ": padding should be at most half of the kernel size", where);
  PoolDesc d;
  d.alg = alg;
  fill_dims(d, x);
  d.kh = kernel[0], d.kw = kernel[1], d.sh = stride[0], d.sw = stride[1];
  d.ph = padding[0], d.pw = padding[1], d.dh = dilation[0], d.dw = dilation[1];
  d.ceil_mode = ceil_mode;
  d.oh = pool_output_size(d.ih, d.kh, d.ph, d.sh, d.dh, ceil_mode);
  d.ow = pool_output_size(d.iw, d.kw, d.pw, d.sw, d.dw, ceil_mode);
  KILN_CHECK(d.oh > 0 && d.ow > 0, op, ": kernel is larger than the padded input, output would be ", d.oh, "x", d.ow,
             where);
  return d;
}

// Runs a 4-d op on a 3-d input as a batch of one.
template <class F>
auto with_batch(const Tensor& x, F f) {
  return f(x.dim() == 3 ? x.unsqueeze(0) : x);
}

// want_indices false: the indices are computed only if autograd needs them (inference skips
// them, which lets the kernel run a plain vectorised max).
ValuesIndices max_pool_4d(const Tensor& x, Pair kernel, Pair stride, Pair padding, Pair dilation, bool ceil_mode,
                          bool want_indices) {
  PoolDesc d = make_pool_desc(x, PoolAlg::max, kernel, stride, padding, dilation, ceil_mode, "max_pool2d");
  // Channels-last in, channels-last out (values and indices).
  const MemoryFormat f = x.suggest_memory_format();
  d.nhwc = f == MemoryFormat::channels_last;
  Tensor xc = x.detach().contiguous(f);
  ValuesIndices r;
  r.values = empty_for({d.n, d.c, d.oh, d.ow}, x, d.dtype, f);
  const bool need = want_indices || autograd::needs_grad({&x});
  if (need) r.indices = empty_for({d.n, d.c, d.oh, d.ow}, x, DType::int64, f);
  dispatch<kernel_op::pool_fwd>(x.device().type, d, xc.data_ptr(), r.values.data_ptr(),
                                                              need ? r.indices.data<int64_t>() : nullptr);
  if (!need) return r;
  autograd::record_fn("MaxPool2dBackward", {x}, {&r.values}, [d, f, idx = r.indices](std::vector<Tensor>& g) {
    Tensor gc = g[0].contiguous(f);
    Tensor gx = empty_for({d.n, d.c, d.ih, d.iw}, gc, d.dtype, f);
    dispatch<kernel_op::pool_bwd>(gc.device().type, d, gc.data_ptr(),
                                                                      idx.data<int64_t>(), gx.data_ptr());
    return std::vector<Tensor>{gx};
  });
  return r;
}

ValuesIndices adaptive_4d(const Tensor& x, Pair out, PoolAlg alg, const char* op) {
  KILN_CHECK(out[0] > 0 && out[1] > 0, op, ": output size ", pair_str(out), " must be positive (input ",
             shape_str(x.sizes()), ")");
  AdaptivePoolDesc d;
  d.alg = alg;
  fill_dims(d, x);
  d.oh = out[0];
  d.ow = out[1];
  Tensor xc = x.detach().contiguous();
  ValuesIndices r;
  r.values = empty_for({d.n, d.c, d.oh, d.ow}, x, d.dtype);
  int64_t* idx = nullptr;
  if (alg == PoolAlg::max) {
    r.indices = empty_for({d.n, d.c, d.oh, d.ow}, x, DType::int64);
    idx = r.indices.data<int64_t>();
  }
  dispatch<kernel_op::adaptive_pool_fwd>(x.device().type, d, xc.data_ptr(),
                                                                               r.values.data_ptr(), idx);
  // The kernels are NCHW; a channels-last input gets its gradient back channels-last (global
  // pooling's tensors are small, the conversion is cheap next to what it saves downstream).
  auto bwd = [d, ind = r.indices, f = x.suggest_memory_format()](std::vector<Tensor>& g) {
    Tensor gc = g[0].contiguous();
    Tensor gx = empty_for({d.n, d.c, d.ih, d.iw}, gc, d.dtype);
    dispatch<kernel_op::adaptive_pool_bwd>(
        gc.device().type, d, gc.data_ptr(), ind.defined() ? ind.data<int64_t>() : nullptr, gx.data_ptr());
    return std::vector<Tensor>{gx.contiguous(f)};
  };
  autograd::record_fn(alg == PoolAlg::max ? "AdaptiveMaxPool2dBackward" : "AdaptiveAvgPool2dBackward", {x},
                      {&r.values}, bwd);
  return r;
}

ValuesIndices squeeze_batch(ValuesIndices r, bool was_3d) {
  if (!was_3d) return r;
  r.values = r.values.squeeze(0);
  if (r.indices.defined()) r.indices = r.indices.squeeze(0);
  return r;
}

ValuesIndices to_dtype(ValuesIndices r, DType t) {
  r.values = r.values.to(t);
  return r;
}

ValuesIndices max_pool(const Tensor& x, Pair kernel, Pair stride, Pair padding, Pair dilation, bool ceil_mode,
                       bool want_indices) {
  check_input(x, "max_pool2d");
  if (is_half(x.dtype()))  // with_indices returns two tensors: routed here, not by graph::call
    return to_dtype(max_pool(x.to(DType::float32), kernel, stride, padding, dilation, ceil_mode, want_indices),
                    x.dtype());
  ValuesIndices r = with_batch(x, [&](const Tensor& x4) {
    return max_pool_4d(x4, kernel, stride, padding, dilation, ceil_mode, want_indices);
  });
  return squeeze_batch(r, x.dim() == 3);
}

}  // namespace

namespace ops {

ValuesIndices max_pool2d_with_indices(const Tensor& x, Pair kernel, Pair stride, Pair padding, Pair dilation,
                                      bool ceil_mode) {
  return max_pool(x, kernel, stride, padding, dilation, ceil_mode, true);
}

Tensor max_pool2d(const Tensor& x, Pair kernel, Pair stride, Pair padding, Pair dilation, bool ceil_mode) {
  return graph::call(
      GraphOp::max_pool2d, {x},
      [&] {
        return std::vector<trace::Attr>{
            trace::ints("kernel", {kernel[0], kernel[1]}), trace::ints("stride", {stride[0], stride[1]}),
            trace::ints("padding", {padding[0], padding[1]}), trace::ints("dilation", {dilation[0], dilation[1]}),
            trace::ints("ceil_mode", {ceil_mode})};
      },
      [&](const Tensor* in) { return max_pool(in[0], kernel, stride, padding, dilation, ceil_mode, false).values; });
}

}  // namespace ops

namespace {

Tensor avg_pool(const Tensor& x, Pair kernel, Pair stride, Pair padding, bool ceil_mode, bool count_include_pad,
                std::optional<int64_t> divisor_override) {
  check_input(x, "avg_pool2d");
  KILN_CHECK(!divisor_override || *divisor_override > 0, "avg_pool2d: divisor_override must be positive, got ",
             divisor_override.value_or(0), " (input ", shape_str(x.sizes()), ")");
  Tensor x4 = x.dim() == 3 ? x.unsqueeze(0) : x;
  PoolDesc d = make_pool_desc(x4, PoolAlg::avg, kernel, stride, padding, {1, 1}, ceil_mode, "avg_pool2d");
  d.count_include_pad = count_include_pad;
  d.divisor_override = divisor_override.value_or(0);
  const MemoryFormat f = x4.suggest_memory_format();
  d.nhwc = f == MemoryFormat::channels_last;
  Tensor xc = x4.detach().contiguous(f);
  Tensor y = empty_for({d.n, d.c, d.oh, d.ow}, x, d.dtype, f);
  dispatch<kernel_op::pool_fwd>(x.device().type, d, xc.data_ptr(), y.data_ptr(), nullptr);
  autograd::record_fn("AvgPool2dBackward", {x4}, {&y}, [d, f](std::vector<Tensor>& g) {
    Tensor gc = g[0].contiguous(f);
    Tensor gx = empty_for({d.n, d.c, d.ih, d.iw}, gc, d.dtype, f);
    dispatch<kernel_op::pool_bwd>(gc.device().type, d, gc.data_ptr(), nullptr,
                                                                      gx.data_ptr());
    return std::vector<Tensor>{gx};
  });
  return x.dim() == 3 ? y.squeeze(0) : y;
}

std::vector<trace::Attr> output_size_attr(Pair output_size) {
  return {trace::ints("output_size", {output_size[0], output_size[1]})};
}

}  // namespace

namespace ops {

Tensor avg_pool2d(const Tensor& x, Pair kernel, Pair stride, Pair padding, bool ceil_mode, bool count_include_pad,
                  std::optional<int64_t> divisor_override) {
  return graph::call(
      GraphOp::avg_pool2d, {x},
      [&] {
        return std::vector<trace::Attr>{trace::ints("kernel", {kernel[0], kernel[1]}),
                                        trace::ints("stride", {stride[0], stride[1]}),
                                        trace::ints("padding", {padding[0], padding[1]}),
                                        trace::ints("ceil_mode", {ceil_mode}),
                                        trace::ints("count_include_pad", {count_include_pad}),
                                        trace::ints("divisor_override", {divisor_override.value_or(0)})};
      },
      [&](const Tensor* in) {
        return avg_pool(in[0], kernel, stride, padding, ceil_mode, count_include_pad, divisor_override);
      });
}

Tensor adaptive_avg_pool2d(const Tensor& x, Pair output_size) {
  return graph::call(
      GraphOp::adaptive_avg_pool2d, {x}, [&] { return output_size_attr(output_size); },
      [&](const Tensor* in) {
        check_input(in[0], "adaptive_avg_pool2d");
        ValuesIndices r = with_batch(in[0], [&](const Tensor& x4) {
          return adaptive_4d(x4, output_size, PoolAlg::avg, "adaptive_avg_pool2d");
        });
        return squeeze_batch(r, in[0].dim() == 3).values;
      });
}

ValuesIndices adaptive_max_pool2d_with_indices(const Tensor& x, Pair output_size) {
  check_input(x, "adaptive_max_pool2d");
  if (is_half(x.dtype()))  // two tensors: routed here, not by graph::call
    return to_dtype(adaptive_max_pool2d_with_indices(x.to(DType::float32), output_size), x.dtype());
  ValuesIndices r = with_batch(x, [&](const Tensor& x4) {
    return adaptive_4d(x4, output_size, PoolAlg::max, "adaptive_max_pool2d");
  });
  return squeeze_batch(r, x.dim() == 3);
}

Tensor adaptive_max_pool2d(const Tensor& x, Pair output_size) {
  return graph::call(
      GraphOp::adaptive_max_pool2d, {x}, [&] { return output_size_attr(output_size); },
      [&](const Tensor* in) { return adaptive_max_pool2d_with_indices(in[0], output_size).values; });
}

}  // namespace ops


}  // namespace kiln
