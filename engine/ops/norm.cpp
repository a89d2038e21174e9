// Normalisation ops (batch norm, local response norm): argument checks, output allocation,
// dispatch, autograd. Kernels: kernels/cpu/{ref,native}/norm.* and pool.* (LRN).
// Test: ctest --test-dir build -R norm
#include "engine/ops/norm.h"

#include "engine/autograd.h"
#include "engine/dispatch.h"
#include "engine/ops/elementwise.h"
#include "engine/graph_op.h"
#include "kernels/common/elementwise.h"
#include "kernels/common/norm.h"

namespace kiln {
namespace {


Tensor half_to_float(const Tensor& t) { return t.defined() && is_half(t.dtype()) ? t.to(DType::float32) : t; }

const void* ptr_or_null(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }
void* mut_ptr_or_null(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }


// Checks a per-channel tensor (weight, bias, running stat) against x's channel count.
void check_channel_tensor(const Tensor& t, const char* what, const Tensor& x, DType dt, bool same_dtype) {
  if (!t.defined()) return;
  KILN_CHECK(t.dim() == 1 && t.size(0) == x.size(1), "batch_norm: ", what, " ", shape_str(t.sizes()),
             " does not match the ", x.size(1), " channels of input ", shape_str(x.sizes()));
  KILN_CHECK(t.device() == x.device(), "batch_norm: ", what, " is on ", t.device(), " but input on ", x.device());
  if (same_dtype)  // parameters must match; running stats are converted (work_buffer)
    KILN_CHECK(t.dtype() == dt, "batch_norm: ", what, " dtype ", t.dtype(), " does not match input ",
               dt, " ", shape_str(x.sizes()));
  else
    KILN_CHECK(is_floating(t.dtype()), "batch_norm: ", what, " must be floating point, got ", t.dtype());
}

// A contiguous buffer of dtype dt holding t's values: t itself when it already is one, so the
// kernel updates it in place; otherwise a copy that write_back() copies into t afterwards.
Tensor work_buffer(const Tensor& t, DType dt) {
  if (!t.defined()) return t;
  return t.to(dt).contiguous();
}
void write_back(const Tensor& work, const Tensor& t) {
  if (!t.defined() || work.is_same(t)) return;
  Tensor dst = t;
  dst.copy_(work);
}

Tensor batch_norm_core(const Tensor& x, const Tensor& weight0, const Tensor& bias0, const Tensor& running_mean,
                       const Tensor& running_var, bool training, double momentum, double eps, bool mixed,
                       bool relu = false);

// The descriptor of batch norm over x [N, C, ...] (channels-last 4-d inputs stay so).
BatchNormDesc bn_desc(const Tensor& x, bool training, double momentum, double eps) {
  BatchNormDesc d;
  d.dtype = x.dtype();
  d.N = x.size(0);
  d.C = x.size(1);
  for (int64_t k = 2; k < x.dim(); ++k) d.S *= x.size(k);
  d.training = training;
  d.eps = eps;
  d.momentum = momentum;
  d.nhwc = x.suggest_memory_format() == MemoryFormat::channels_last;
  return d;
}

}  // namespace

namespace ops {

}  // namespace ops

namespace {

std::vector<trace::Attr> bn_attrs(bool training, double eps) {
  return {trace::ints("training", {training}), trace::real("eps", eps)};
}

// Graph op batch_norm (Half::own: half data may run with float32 parameters and statistics).
Tensor batch_norm_body(const Tensor& x0, const Tensor& weight0, const Tensor& bias0, const Tensor& running_mean,
                       const Tensor& running_var, bool training, double momentum, double eps) {
  KILN_CHECK(x0.defined(), "batch_norm: undefined input");
  KILN_CHECK(x0.dim() >= 2, "batch_norm: input ", shape_str(x0.sizes()), " must have at least 2 dims (N, C, ...)");
  KILN_CHECK(is_floating(x0.dtype()), "batch_norm: needs a floating-point input, got ", x0.dtype(), " ",
             shape_str(x0.sizes()));
  const Tensor& x = x0;
  // Half data runs as it is where a kernel takes it (BatchNormDesc's contract: half data, float32
  // parameters and statistics): bfloat16 on any device (oneDNN), float16 on CUDA only (cuDNN,
  // kiln's CUDA kernel; the CPU keeps float16 on float32 copies); else through float32 copies.
  if (is_half(x.dtype())) {
    const BatchNormDesc probe = bn_desc(x, training, momentum, eps);
    const bool half_ok = x.dtype() == DType::bfloat16 || x.device().type == DeviceType::cuda;
    if (!half_ok || !find_kernel<kernel_op::batch_norm_fwd>(x.device().type, probe) ||
        !find_kernel<kernel_op::batch_norm_bwd>(x.device().type, probe))
      return batch_norm_body(x.to(DType::float32), half_to_float(weight0), half_to_float(bias0), running_mean,
                             running_var, training, momentum, eps)
          .to(x.dtype());
    Tensor y = batch_norm_core(x, half_to_float(weight0), half_to_float(bias0), running_mean, running_var, training,
                               momentum, eps, /*mixed=*/true);
    return y;
  }
  return batch_norm_core(x, weight0, bias0, running_mean, running_var, training, momentum, eps, false);
}

}  // namespace

namespace ops {

Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                  const Tensor& running_var, bool training, double momentum, double eps) {
  return graph::call(
      GraphOp::batch_norm, {x, weight, bias, running_mean, running_var}, [&] { return bn_attrs(training, eps); },
      [&](const Tensor* in) {
        return batch_norm_body(in[0], in[1], in[2], in[3], in[4], training, momentum, eps);
      });
}

}  // namespace ops

namespace {

// The kernel call and autograd of batch_norm. mixed: x is half and the parameters and
// statistics float32 (their gradients are returned in the parameters' own dtypes).
Tensor batch_norm_core(const Tensor& x, const Tensor& weight0, const Tensor& bias0, const Tensor& running_mean,
                       const Tensor& running_var, bool training, double momentum, double eps, bool mixed,
                       bool relu) {
  const Tensor& x0 = x;
  const DType dt = mixed ? DType::float32 : x.dtype();  // the parameters' dtype
  check_channel_tensor(weight0, "weight", x, dt, true);
  check_channel_tensor(bias0, "bias", x, dt, true);
  check_channel_tensor(running_mean, "running_mean", x, dt, false);
  check_channel_tensor(running_var, "running_var", x, dt, false);
  KILN_CHECK(running_mean.defined() == running_var.defined(),
             "batch_norm: running_mean and running_var must be given together (input ", shape_str(x.sizes()), ")");
  KILN_CHECK(training || running_mean.defined(), "batch_norm: eval mode (training=false) needs running_mean and "
             "running_var (input ", shape_str(x.sizes()), ")");
  BatchNormDesc d = bn_desc(x, training, momentum, eps);
  KILN_CHECK(!training || d.N * d.S > 1, "batch_norm: expected more than 1 value per channel when training, got input ",
             shape_str(x.sizes()));

  // Channels-last stays channels-last: the kernels take [N, H*W, C] as they take [N, C, H*W].
  const MemoryFormat fmt = d.nhwc ? MemoryFormat::channels_last : MemoryFormat::contiguous;
  d.relu = relu;  // forward only
  Tensor xc = x.contiguous(fmt);
  Tensor weight = weight0.defined() ? weight0.contiguous() : weight0;
  Tensor bias = bias0.defined() ? bias0.contiguous() : bias0;
  Tensor rm = work_buffer(running_mean, dt), rv = work_buffer(running_var, dt);
  const TensorOptions opts = TensorOptions(dt).with_device(x.device());
  Tensor y = empty(x.sizes(), TensorOptions(x.dtype()).with_device(x.device()), fmt);
  Tensor save_mean = empty({d.C}, opts), save_invstd = empty({d.C}, opts);
  dispatch<kernel_op::batch_norm_fwd>(x.device().type, d, xc.data_ptr(), ptr_or_null(weight), ptr_or_null(bias), mut_ptr_or_null(rm),
              mut_ptr_or_null(rv), y.data_ptr(), save_mean.data_ptr(), save_invstd.data_ptr());
  write_back(rm, running_mean);
  write_back(rv, running_var);
  if (training && running_mean.defined()) {  // the kernel updated the running statistics in place
    running_mean.bump_version();
    running_var.bump_version();
  }

  BatchNormDesc bd = d;
  bd.relu = false;
  autograd::record_fn(relu ? "BatchNormReluBackward" : "BatchNormBackward", {x0, weight0, bias0}, {&y},
                      [d = bd, xc, weight, save_mean, save_invstd, need_x = x0.requires_grad(),
                       need_w = weight0.requires_grad(), need_b = bias0.requires_grad(),
                       y_relu = relu ? y.detach() : Tensor()](std::vector<Tensor>& g) {
                        const MemoryFormat f = d.nhwc ? MemoryFormat::channels_last : MemoryFormat::contiguous;
                        Tensor g0 = g[0].to(d.dtype);
                        if (y_relu.defined()) g0 = ops::binary_raw(int(BinaryOp::relu_bwd), g0, y_relu);
                        Tensor gc = g0.contiguous(f);
                        const TensorOptions o = TensorOptions(d.dtype).with_device(xc.device());
                        const TensorOptions po = TensorOptions(save_mean.dtype()).with_device(xc.device());
                        Tensor gx = need_x ? empty(xc.sizes(), o, f) : Tensor();
                        Tensor gw = need_w ? empty({d.C}, po) : Tensor();
                        Tensor gb = need_b ? empty({d.C}, po) : Tensor();
                        dispatch<kernel_op::batch_norm_bwd>(xc.device().type, d, xc.data_ptr(), gc.data_ptr(), ptr_or_null(weight),
                                    save_mean.data_ptr(), save_invstd.data_ptr(), mut_ptr_or_null(gx),
                                    mut_ptr_or_null(gw), mut_ptr_or_null(gb));
                        return std::vector<Tensor>{gx, gw, gb};
                      });
  return y;
}

}  // namespace

namespace ops {

Tensor batch_norm_relu(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                       const Tensor& running_var, bool training, double momentum, double eps) {
  KILN_CHECK(x.defined(), "batch_norm_relu: undefined input");
  return graph::call(
      GraphOp::batch_norm_relu, {x, weight, bias, running_mean, running_var}, [&] { return bn_attrs(training, eps); },
      [&](const Tensor* in) {
        // Half types: the kernels take no post-op.
        if (is_half(in[0].dtype()) || !is_floating(in[0].dtype()) || in[0].dim() < 2)
          return relu(batch_norm(in[0], in[1], in[2], in[3], in[4], training, momentum, eps));
        return batch_norm_core(in[0], in[1], in[2], in[3], in[4], training, momentum, eps, false, true);
      });
}

}  // namespace ops

namespace {

Tensor lrn_body(const Tensor& x, int64_t size, double alpha, double beta, double k) {
  KILN_CHECK(x.defined(), "local_response_norm: undefined input tensor");
  KILN_CHECK(x.dim() >= 3, "local_response_norm: expected an input with at least 3 dims (N, C, ...), got ",
             shape_str(x.sizes()));
  KILN_CHECK(x.is_floating_point(), "local_response_norm: needs a floating-point input, got ", x.dtype(), " ",
             shape_str(x.sizes()));
  KILN_CHECK(size > 0, "local_response_norm: size must be positive, got ", size, " (input ", shape_str(x.sizes()),
             ")");
  LrnDesc d;
  d.dtype = x.dtype();
  d.n = x.size(0);
  d.c = x.size(1);
  d.inner = d.n * d.c == 0 ? 0 : x.numel() / (d.n * d.c);
  d.size = size;
  d.alpha = alpha;
  d.beta = beta;
  d.k = k;
  Tensor xc = x.detach().contiguous();
  Tensor y = empty(x.sizes(), TensorOptions(d.dtype).with_device(x.device()));
  Tensor scale = empty(x.sizes(), TensorOptions(d.dtype).with_device(x.device()));
  dispatch<kernel_op::lrn_fwd>(x.device().type, d, xc.data_ptr(), y.data_ptr(),
                                                              scale.data_ptr());
  autograd::record_fn("LocalResponseNormBackward", {x}, {&y},
                      [d, xc, scale, yd = y.detach()](std::vector<Tensor>& g) {
                        Tensor gc = g[0].contiguous();
                        Tensor gx = empty(xc.sizes(), TensorOptions(d.dtype).with_device(gc.device()));
                        dispatch<kernel_op::lrn_bwd>(
                            gc.device().type, d, xc.data_ptr(), yd.data_ptr(), scale.data_ptr(), gc.data_ptr(),
                            gx.data_ptr());
                        return std::vector<Tensor>{gx};
                      });
  return y;
}

}  // namespace

namespace ops {

Tensor local_response_norm(const Tensor& x, int64_t size, double alpha, double beta, double k) {
  return graph::call(
      GraphOp::local_response_norm, {x},
      [&] {
        return std::vector<trace::Attr>{trace::ints("size", {size}), trace::real("alpha", alpha),
                                        trace::real("beta", beta), trace::real("k", k)};
      },
      [&](const Tensor* in) { return lrn_body(in[0], size, alpha, beta, k); });
}

}  // namespace ops


}  // namespace kiln
