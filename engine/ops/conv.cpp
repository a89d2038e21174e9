// conv2d and conv_transpose2d: argument checks, output allocation, the three kernel calls and
// autograd. See engine/ops/conv.h; tests in tests/kernels/test_conv.cpp and
// tests/grad/test_conv_grad.cpp.
#include "engine/ops/conv.h"

#include "engine/autograd.h"
#include "engine/dispatch.h"
#include "engine/graph_op.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"
#include "engine/trace.h"
#include "kernels/common/conv.h"
#include "kernels/common/elementwise.h"

namespace kiln {
namespace ops {

std::string ConvHW::str() const { return "(" + std::to_string(h) + ", " + std::to_string(w) + ")"; }

}  // namespace ops

namespace {

using ops::ConvHW;

// --- kernel calls on dense operands of the descriptor's dtype and layout

auto& fwd_op() { return op_table<kernel_op::conv2d_fwd>(); }
auto& bwd_data_op() { return op_table<kernel_op::conv2d_bwd_data>(); }
auto& bwd_weights_op() { return op_table<kernel_op::conv2d_bwd_weights>(); }

MemoryFormat format_of(const ConvDesc& d) { return d.nhwc ? MemoryFormat::channels_last : MemoryFormat::contiguous; }

// `d` with nhwc set when `want` and a kernel of the current preference takes the channels-last
// problem; otherwise NCHW. Each pass picks its layout separately (operands are converted to it).
template <class Op>
ConvDesc pick_layout(const Op& op, ConvDesc d, bool want, Device dev) {
  d.nhwc = false;
  // float16 channels-last on CUDA only (cuDNN's tensor-core kernels prefer NHWC); the CPU
  // keeps float16 in NCHW as before.
  const bool f16_cuda = d.dtype == DType::float16 && dev.type == DeviceType::cuda;
  if (want && (d.dtype == DType::float32 || d.dtype == DType::float64 || d.dtype == DType::bfloat16 || f16_cuda)) {
    ConvDesc n = d;
    n.nhwc = true;
    if (op.find(dev.type, n)) d.nhwc = true;
  }
  return d;
}

// `payload` (may be null) carries the forward kernel's state to the backward calls of the same
// node (engine/op_decl.h). With d.sum, `dst_in` (dense in the descriptor's layout, owned by this
// call) holds the residual and becomes the output.
Tensor run_fwd(const ConvDesc& d, const Tensor& src, const Tensor& wei, const Tensor& bias, Device dev,
               KernelPayload* payload = nullptr, const Tensor& dst_in = Tensor()) {
  Tensor s = src.contiguous(format_of(d));
  Tensor dst = d.sum ? dst_in : empty({d.N, d.K, d.P, d.Q}, TensorOptions(d.dtype).with_device(dev), format_of(d));
  const void* b = d.has_bias ? bias.data_ptr() : nullptr;
  if (payload)
    fwd_op().call_with(dev.type, d, *payload, s.data_ptr(), wei.data_ptr(), b, dst.data_ptr());
  else
    fwd_op()(dev.type, d, s.data_ptr(), wei.data_ptr(), b, dst.data_ptr());
  return dst;
}

Tensor run_bwd_data(const ConvDesc& d, const Tensor& diff_dst, const Tensor& wei, Device dev,
                    KernelPayload* payload = nullptr) {
  Tensor dd = diff_dst.contiguous(format_of(d));
  Tensor diff_src = empty({d.N, d.C, d.H, d.W}, TensorOptions(d.dtype).with_device(dev), format_of(d));
  if (payload)
    bwd_data_op().call_with(dev.type, d, *payload, dd.data_ptr(), wei.data_ptr(), diff_src.data_ptr());
  else
    bwd_data_op()(dev.type, d, dd.data_ptr(), wei.data_ptr(), diff_src.data_ptr());
  return diff_src;
}

// Fills *diff_wei [K, C/groups, R, S] and/or *diff_bias [K] (null pointers: not wanted).
void run_bwd_weights(const ConvDesc& d, const Tensor& src, const Tensor& diff_dst, Tensor* diff_wei, Tensor* diff_bias,
                     Device dev, KernelPayload* payload = nullptr) {
  if (!diff_wei && !diff_bias) return;
  Tensor s = src.contiguous(format_of(d)), dd = diff_dst.contiguous(format_of(d));
  TensorOptions o = TensorOptions(d.dtype).with_device(dev);
  if (diff_wei) *diff_wei = empty({d.K, d.C / d.groups, d.R, d.S}, o);
  if (diff_bias) *diff_bias = empty({d.K}, is_half(d.dtype) ? TensorOptions(DType::float32).with_device(dev) : o);
  void* dw = diff_wei ? diff_wei->data_ptr() : nullptr;
  void* db = diff_bias ? diff_bias->data_ptr() : nullptr;
  if (payload)
    bwd_weights_op().call_with(dev.type, d, *payload, s.data_ptr(), dd.data_ptr(), dw, db);
  else
    bwd_weights_op()(dev.type, d, s.data_ptr(), dd.data_ptr(), dw, db);
  if (diff_bias && is_half(d.dtype)) *diff_bias = diff_bias->to(d.dtype);
}

// --- argument checks shared by both ops

void check_operands(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias) {
  KILN_CHECK(x.defined() && weight.defined(), op, ": undefined ", x.defined() ? "weight" : "input");
  KILN_CHECK(x.dim() == 4, op, ": input must be 4-d [N, C, H, W], got ", shape_str(x.sizes()));
  KILN_CHECK(weight.dim() == 4, op, ": weight must be 4-d, got ", shape_str(weight.sizes()));
  KILN_CHECK(x.is_floating_point(), op, ": needs a floating-point input, got ", x.dtype());
  KILN_CHECK(x.dtype() == weight.dtype(), op, ": dtype mismatch, input ", x.dtype(), " ", shape_str(x.sizes()),
             " vs weight ", weight.dtype(), " ", shape_str(weight.sizes()));
  KILN_CHECK(x.device() == weight.device(), op, ": device mismatch, input on ", x.device(), ", weight on ",
             weight.device());
  if (bias.defined()) {
    KILN_CHECK(bias.dtype() == x.dtype(), op, ": dtype mismatch, input ", x.dtype(), " ", shape_str(x.sizes()),
               " vs bias ", bias.dtype(), " ", shape_str(bias.sizes()));
    KILN_CHECK(bias.device() == x.device(), op, ": device mismatch, input on ", x.device(), ", bias on ",
               bias.device());
  }
}

void check_geometry(const char* op, const Tensor& x, const Tensor& weight, ConvHW stride, ConvHW padding,
                    ConvHW dilation, int64_t groups) {
  KILN_CHECK(stride.h > 0 && stride.w > 0, op, ": stride ", stride.str(), " must be positive (input ",
             shape_str(x.sizes()), ", weight ", shape_str(weight.sizes()), ")");
  KILN_CHECK(dilation.h > 0 && dilation.w > 0, op, ": dilation ", dilation.str(), " must be positive (input ",
             shape_str(x.sizes()), ", weight ", shape_str(weight.sizes()), ")");
  KILN_CHECK(padding.h >= 0 && padding.w >= 0, op, ": padding ", padding.str(), " must be non-negative (input ",
             shape_str(x.sizes()), ", weight ", shape_str(weight.sizes()), ")");
  KILN_CHECK(groups > 0, op, ": groups ", groups, " must be positive");
  KILN_CHECK(weight.size(0) > 0 && weight.size(1) > 0 && weight.size(2) > 0 && weight.size(3) > 0, op,
             ": weight ", shape_str(weight.sizes()), " has an empty dim");
  KILN_CHECK(x.size(1) > 0 && x.size(2) > 0 && x.size(3) > 0, op, ": input ", shape_str(x.sizes()),
             " has an empty channel or spatial dim");
}

// For conv2d the padded input must hold the dilated kernel; for the transposed op the same
// holds for the (virtual) forward convolution whose input is the transposed op's output.
void check_fits(const char* op, const Tensor& x, const Tensor& weight, int64_t H, int64_t W, ConvHW padding,
                ConvHW dilation) {
  const int64_t R = weight.size(2), S = weight.size(3);
  const int64_t eff_r = dilation.h * (R - 1) + 1, eff_s = dilation.w * (S - 1) + 1;
  KILN_CHECK(H + 2 * padding.h >= eff_r && W + 2 * padding.w >= eff_s, op, ": kernel ", R, "x", S, " (dilation ",
             dilation.str(), ", extent ", eff_r, "x", eff_s, ") is larger than the padded input ", H + 2 * padding.h,
             "x", W + 2 * padding.w, " (input ", shape_str(x.sizes()), ", weight ", shape_str(weight.sizes()),
             ", padding ", padding.str(), ")");
}

Tensor conv_transpose2d_impl(const Tensor& x, const Tensor& weight, const Tensor& bias, ConvHW stride,
                             ConvHW padding, ConvHW output_padding, ConvHW dilation, int64_t groups);

}  // namespace

namespace ops {

Tensor conv2d_impl(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& residual, ConvHW stride,
                   ConvHW padding, ConvHW dilation, int64_t groups, bool relu);

}  // namespace ops

namespace {

std::vector<trace::Attr> conv_attrs(ops::ConvHW stride, ops::ConvHW padding, ops::ConvHW dilation, int64_t groups) {
  return {trace::ints("stride", {stride.h, stride.w}), trace::ints("padding", {padding.h, padding.w}),
          trace::ints("dilation", {dilation.h, dilation.w}), trace::ints("groups", {groups})};
}

}  // namespace

namespace ops {

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, ConvHW stride, ConvHW padding, ConvHW dilation,
              int64_t groups) {
  return graph::call(
      GraphOp::conv2d, {x, weight, bias}, [&] { return conv_attrs(stride, padding, dilation, groups); },
      [&](const Tensor* in) {
        return conv2d_impl(in[0], in[1], in[2], Tensor(), stride, padding, dilation, groups, false);
      });
}

Tensor conv2d_relu(const Tensor& x, const Tensor& weight, const Tensor& bias, ConvHW stride, ConvHW padding,
                   ConvHW dilation, int64_t groups) {
  return graph::call(
      GraphOp::conv2d_relu, {x, weight, bias}, [&] { return conv_attrs(stride, padding, dilation, groups); },
      [&](const Tensor* in) {
        return conv2d_impl(in[0], in[1], in[2], Tensor(), stride, padding, dilation, groups, true);
      });
}

Tensor conv2d_sum(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& residual, ConvHW stride,
                  ConvHW padding, ConvHW dilation, int64_t groups, bool relu) {
  KILN_CHECK(residual.defined(), "conv2d_sum: undefined residual");
  return graph::call(
      GraphOp::conv2d_sum, {x, weight, bias, residual},
      [&] {
        std::vector<trace::Attr> a = conv_attrs(stride, padding, dilation, groups);
        a.push_back(trace::ints("relu", {relu ? 1 : 0}));
        return a;
      },
      [&](const Tensor* in) {
        return conv2d_impl(in[0], in[1], in[2], in[3], stride, padding, dilation, groups, relu);
      });
}

Tensor conv2d_impl(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& residual, ConvHW stride,
                   ConvHW padding, ConvHW dilation, int64_t groups, bool relu) {
  const bool sum = residual.defined();
  const char* op = sum ? "conv2d_sum" : relu ? "conv2d_relu" : "conv2d";
  check_operands(op, x, weight, bias);
  check_geometry(op, x, weight, stride, padding, dilation, groups);
  const int64_t C = x.size(1), K = weight.size(0);
  KILN_CHECK(C % groups == 0, op, ": input ", shape_str(x.sizes()), " has ", C, " channels, not divisible by groups ",
             groups);
  KILN_CHECK(K % groups == 0, op, ": weight ", shape_str(weight.sizes()), " has ", K,
             " output channels, not divisible by groups ", groups);
  KILN_CHECK(C == weight.size(1) * groups, op, ": input ", shape_str(x.sizes()), " has ", C,
             " channels but weight ", shape_str(weight.sizes()), " expects ", weight.size(1) * groups, " (groups ",
             groups, ")");
  if (bias.defined())
    KILN_CHECK(bias.dim() == 1 && bias.size(0) == K, op, ": bias ", shape_str(bias.sizes()), " does not match the ",
               K, " output channels of weight ", shape_str(weight.sizes()));
  check_fits(op, x, weight, x.size(2), x.size(3), padding, dilation);

  ConvDesc d;
  d.dtype = x.dtype();
  d.N = x.size(0), d.C = C, d.H = x.size(2), d.W = x.size(3);
  d.K = K, d.R = weight.size(2), d.S = weight.size(3);
  d.stride_h = stride.h, d.stride_w = stride.w;
  d.pad_h = padding.h, d.pad_w = padding.w;
  d.dilation_h = dilation.h, d.dilation_w = dilation.w;
  d.groups = groups;
  d.has_bias = bias.defined();
  d.set_output_size();
  if (sum) {
    KILN_CHECK(residual.sizes() == Shape({d.N, d.K, d.P, d.Q}), op, ": residual ", shape_str(residual.sizes()),
               " does not match the output [", d.N, ", ", d.K, ", ", d.P, ", ", d.Q, "] (input ", shape_str(x.sizes()),
               ", weight ", shape_str(weight.sizes()), ")");
    KILN_CHECK(residual.dtype() == x.dtype() && residual.device() == x.device(), op, ": residual is ",
               residual.dtype(), " on ", residual.device(), ", input ", x.dtype(), " on ", x.device());
  }

  const Device dev = x.device();
  // A channels-last input gives a channels-last output when a kernel takes it (PyTorch's rule).
  const bool cl = x.suggest_memory_format() == MemoryFormat::channels_last;
  // The residual post-op is picked with the layout. It runs fused only on the backend that would
  // run this convolution without it (else a descriptor only the fallback `ref` takes would run
  // the oracle's loops in place of native's kernels); otherwise the convolution, the add and the
  // ReLU run as separate ops (same values, two more passes over the output).
  if (sum) {
    ConvDesc s = d;
    s.sum = true;
    s.relu = relu;
    s = pick_layout(fwd_op(), s, cl, dev);
    ConvDesc alone = s;
    alone.sum = false;
    const auto* fused = fwd_op().find(dev.type, s);
    const auto* plain = fwd_op().find(dev.type, alone);
    if (!fused || (plain && plain->backend != fused->backend)) {
      Tensor y = ops::add(ops::conv2d(x, weight, bias, stride, padding, dilation, groups), residual);
      return relu ? ops::relu(y) : y;
    }
    d.nhwc = s.nhwc;
  } else {
    d = pick_layout(fwd_op(), d, cl, dev);
  }
  // Half types run as they are where a kernel takes them (bfloat16 on oneDNN); else graph::call
  // runs this again on float32 copies.
  if (is_half(d.dtype) && !fwd_op().find(dev.type, d)) return graph::float32_fallback();
  // The post-ops are the forward kernel's business; backward descriptors never carry them.
  ConvDesc fd = d;
  fd.relu = relu;
  fd.sum = sum;
  Tensor xc = x.contiguous(format_of(d)).detach(), wc = weight.contiguous().detach();
  Tensor bc = bias.defined() ? (is_half(d.dtype) ? bias.to(DType::float32) : bias).contiguous().detach() : Tensor();
  // Training: the forward kernel may leave state for this node's backward (oneDNN: its backward
  // primitives). Shared by the node's closure; released with the graph.
  auto payload = autograd::needs_grad({&x, &weight, &bias, &residual}) ? std::make_shared<KernelPayload>() : nullptr;
  // The sum post-op accumulates into its output: a fresh copy of the residual in the output's
  // layout (the residual itself stays as it was).
  Tensor dst_in;
  if (sum) {
    dst_in = empty({d.N, d.K, d.P, d.Q}, TensorOptions(d.dtype).with_device(dev), format_of(d));
    dst_in.copy_(residual.detach());
  }
  // Nothing trains the weights in this call (inference, eval with no_grad): a kernel may keep
  // what it derives from them (native packs them) under the values' key.
  if (!autograd::needs_grad({&weight})) fd.weights_key = wc.values_key();
  Tensor y = run_fwd(fd, xc, wc, bc, dev, payload.get(), dst_in);
  autograd::record_fn(sum ? (relu ? "Conv2dSumReluBackward" : "Conv2dSumBackward")
                          : (relu ? "Conv2dReluBackward" : "Conv2dBackward"),
                      {x, weight, bias, residual}, {&y},
                      [d, xc, wc, dev, payload, need_x = x.requires_grad(), need_w = weight.requires_grad(),
                       need_b = bias.requires_grad(), need_r = residual.requires_grad(),
                       y_relu = relu ? y.detach() : Tensor()](std::vector<Tensor>& g) {
                        Tensor gy = g[0].to(d.dtype);
                        if (y_relu.defined()) gy = binary_raw(int(BinaryOp::relu_bwd), gy, y_relu);  // y > 0 iff pre > 0
                        Tensor gx, gw, gb;
                        // A half-type pass no kernel takes runs in float32 on converted copies.
                        auto pass = [&](const auto& op, const Tensor& a, const Tensor& b, auto&& run) {
                          ConvDesc p = pick_layout(op, d, d.nhwc, dev);
                          if (!is_half(d.dtype) || op.find(dev.type, p)) return run(p, a, b);
                          p.dtype = DType::float32;
                          return run(pick_layout(op, p, d.nhwc, dev), a.to(DType::float32), b.to(DType::float32));
                        };
                        if (need_x)
                          gx = pass(bwd_data_op(), gy, wc, [&](const ConvDesc& p, const Tensor& a, const Tensor& b) {
                                 return run_bwd_data(p, a, b, dev, payload.get()).to(d.dtype);
                               });
                        if (need_w || need_b)
                          pass(bwd_weights_op(), xc, gy, [&](const ConvDesc& p, const Tensor& a, const Tensor& b) {
                            run_bwd_weights(p, a, b, need_w ? &gw : nullptr, need_b ? &gb : nullptr, dev,
                                            payload.get());
                            if (gw.defined()) gw = gw.to(d.dtype);
                            if (gb.defined()) gb = gb.to(d.dtype);
                            return 0;
                          });
                        // The residual's gradient is the (masked) output gradient itself.
                        return std::vector<Tensor>{gx, gw, gb, need_r ? gy : Tensor()};
                      });
  return y;
}

Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias, ConvHW stride, ConvHW padding,
                        ConvHW output_padding, ConvHW dilation, int64_t groups) {
  check_operands("conv_transpose2d", x, weight, bias);  // dtypes agree before half types become float32
  return graph::call(
      GraphOp::conv_transpose2d, {x, weight, bias},
      [&] {
        return std::vector<trace::Attr>{
            trace::ints("stride", {stride.h, stride.w}), trace::ints("padding", {padding.h, padding.w}),
            trace::ints("output_padding", {output_padding.h, output_padding.w}),
            trace::ints("dilation", {dilation.h, dilation.w}), trace::ints("groups", {groups})};
      },
      [&](const Tensor* in) {
        return conv_transpose2d_impl(in[0], in[1], in[2], stride, padding, output_padding, dilation, groups);
      });
}

}  // namespace ops

namespace {

Tensor conv_transpose2d_impl(const Tensor& x, const Tensor& weight, const Tensor& bias, ConvHW stride,
                             ConvHW padding, ConvHW output_padding, ConvHW dilation, int64_t groups) {
  const char* op = "conv_transpose2d";  // operands checked by ops::conv_transpose2d
  check_geometry(op, x, weight, stride, padding, dilation, groups);
  const int64_t C_in = x.size(1);
  KILN_CHECK(weight.size(0) % groups == 0, op, ": weight ", shape_str(weight.sizes()), " has ", weight.size(0),
             " input channels, not divisible by groups ", groups);
  KILN_CHECK(C_in == weight.size(0), op, ": input ", shape_str(x.sizes()), " has ", C_in, " channels but weight ",
             shape_str(weight.sizes()), " expects ", weight.size(0), " (groups ", groups, ")");
  const int64_t C_out = weight.size(1) * groups;
  if (bias.defined())
    KILN_CHECK(bias.dim() == 1 && bias.size(0) == C_out, op, ": bias ", shape_str(bias.sizes()),
               " does not match the ", C_out, " output channels of weight ", shape_str(weight.sizes()), " (groups ",
               groups, ")");
  KILN_CHECK(output_padding.h >= 0 && output_padding.w >= 0 &&
                 (output_padding.h < stride.h || output_padding.h < dilation.h) &&
                 (output_padding.w < stride.w || output_padding.w < dilation.w),
             op, ": output_padding ", output_padding.str(), " must be non-negative and smaller than stride ",
             stride.str(), " or dilation ", dilation.str(), " (input ", shape_str(x.sizes()), ")");
  const int64_t R = weight.size(2), S = weight.size(3);
  const int64_t H_out = conv_transpose_output_size(x.size(2), R, stride.h, padding.h, output_padding.h, dilation.h);
  const int64_t W_out = conv_transpose_output_size(x.size(3), S, stride.w, padding.w, output_padding.w, dilation.w);
  KILN_CHECK(H_out > 0 && W_out > 0, op, ": output size ", H_out, "x", W_out, " is not positive (input ",
             shape_str(x.sizes()), ", weight ", shape_str(weight.sizes()), ", stride ", stride.str(), ", padding ",
             padding.str(), ")");

  // The forward convolution whose backward-data this is: its input is our output, its output our input.
  ConvDesc d;
  d.dtype = x.dtype();
  d.N = x.size(0), d.C = C_out, d.H = H_out, d.W = W_out;
  d.K = C_in, d.R = R, d.S = S, d.P = x.size(2), d.Q = x.size(3);
  d.stride_h = stride.h, d.stride_w = stride.w;
  d.pad_h = padding.h, d.pad_w = padding.w;
  d.dilation_h = dilation.h, d.dilation_w = dilation.w;
  d.groups = groups;
  d.has_bias = false;  // the bias belongs to our output (the conv's input): added separately

  const Device dev = x.device();
  Tensor xc = x.contiguous().detach(), wc = weight.contiguous().detach();
  Tensor y = run_bwd_data(d, xc, wc, dev);
  if (bias.defined())
    y = ops::binary_raw(int(BinaryOp::add), y, bias.detach().reshape({1, C_out, 1, 1}));
  autograd::record_fn("ConvTranspose2dBackward", {x, weight, bias}, {&y},
                      [d, xc, wc, dev, need_x = x.requires_grad(), need_w = weight.requires_grad(),
                       need_b = bias.requires_grad()](std::vector<Tensor>& g) {
                        Tensor gy = g[0].to(d.dtype).contiguous();
                        Tensor gx, gw, gb;
                        if (need_x) gx = run_fwd(d, gy, wc, Tensor(), dev);
                        if (need_w) run_bwd_weights(d, gy, xc, &gw, nullptr, dev);
                        if (need_b) gb = ops::sum(gy, {0, 2, 3});
                        return std::vector<Tensor>{gx, gw, gb};
                      });
  return y;
}

}  // namespace

}  // namespace kiln
