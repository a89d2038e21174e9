// Op wrappers of the optimizer family: argument checks, dispatch, registration. The updates write
// through data pointers, outside autograd (parameters are leaves that require grad, which the
// in-place Tensor methods refuse). Kernels: kernels/cpu/{ref,native}/optim.*.
// Test: ctest --test-dir build -R optim
#include "engine/ops/optim.h"

#include "engine/dispatch.h"
#include "kernels/cpu/native/optim.h"
#include "kernels/cpu/ref/optim.h"

namespace kiln {
namespace {

#define KILN_SGD_STEP KILN_OP("optim_sgd", SGDStepDesc, void*, const void*, void*)
#define KILN_ADAM_STEP KILN_OP("optim_adam", AdamStepDesc, void*, const void*, void*, void*)
#define KILN_LARS_STEP KILN_OP("optim_lars", LarsStepDesc, void*, const void*, void*)
#define KILN_SUM_SQUARES KILN_OP("optim_sum_squares", VecDesc, const void*, double*)
#define KILN_SCALE KILN_OP("optim_scale", VecDesc, void*)

// Checks `t` (the parameter's `what`) against the parameter p.
void check_like(const Tensor& p, const Tensor& t, const char* op, const char* what) {
  KILN_CHECK(t.defined(), op, ": ", what, " is undefined (parameter ", p.str(), ")");
  KILN_CHECK(t.sizes() == p.sizes(), op, ": ", what, " ", shape_str(t.sizes()), " does not match parameter ",
             shape_str(p.sizes()));
  KILN_CHECK(t.dtype() == p.dtype(), op, ": ", what, " dtype ", t.dtype(), " does not match parameter dtype ",
             p.dtype());
  KILN_CHECK(t.device() == p.device(), op, ": ", what, " is on another device than the parameter");
  KILN_CHECK(t.is_contiguous(), op, ": ", what, " ", shape_str(t.sizes()), " must be contiguous");
}

void check_param(const Tensor& p, const char* op) {
  KILN_CHECK(p.defined(), op, ": undefined parameter");
  KILN_CHECK(p.dtype() == DType::float32 || p.dtype() == DType::float64, op, ": parameter ", p.str(),
             " must be float32 or float64");
  KILN_CHECK(p.is_contiguous(), op, ": parameter ", p.str(), " must be contiguous");
}

}  // namespace

namespace ops {

void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& buf, SGDStepDesc d) {
  check_param(param, "sgd_step");
  check_like(param, grad, "sgd_step", "gradient");
  if (d.momentum != 0) check_like(param, buf, "sgd_step", "momentum buffer");
  d.dtype = param.dtype();
  d.n = param.numel();
  KILN_SGD_STEP(param.device().type, d, param.data_ptr(), grad.data_ptr(),
                d.momentum != 0 ? buf.data_ptr() : nullptr);
}

void adam_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, AdamStepDesc d) {
  check_param(param, "adam_step");
  check_like(param, grad, "adam_step", "gradient");
  check_like(param, m, "adam_step", "exp_avg");
  check_like(param, v, "adam_step", "exp_avg_sq");
  KILN_CHECK(d.step >= 1, "adam_step: step must be >= 1, got ", d.step);
  d.dtype = param.dtype();
  d.n = param.numel();
  KILN_ADAM_STEP(param.device().type, d, param.data_ptr(), grad.data_ptr(), m.data_ptr(), v.data_ptr());
}

void lars_step(const Tensor& param, const Tensor& grad, const Tensor& buf, LarsStepDesc d) {
  check_param(param, "lars_step");
  check_like(param, grad, "lars_step", "gradient");
  check_like(param, buf, "lars_step", "momentum buffer");
  d.dtype = param.dtype();
  d.n = param.numel();
  KILN_LARS_STEP(param.device().type, d, param.data_ptr(), grad.data_ptr(), buf.data_ptr());
}

double sum_squares(const Tensor& x0) {
  KILN_CHECK(x0.defined(), "sum_squares: undefined tensor");
  Tensor x = x0.dtype() == DType::float32 || x0.dtype() == DType::float64 ? x0 : x0.to(DType::float64);
  x = x.contiguous();
  VecDesc d;
  d.dtype = x.dtype();
  d.n = x.numel();
  if (x.device().is_cuda()) {  // the kernel writes its double where the data lives
    Tensor out = zeros({1}, TensorOptions(DType::float64).with_device(x.device()));
    KILN_SUM_SQUARES(x.device().type, d, x.data_ptr(), out.data<double>());
    return out.item();
  }
  double out = 0;
  KILN_SUM_SQUARES(x.device().type, d, x.data_ptr(), &out);
  return out;
}

void scale_(const Tensor& x, double s) {
  check_param(x, "scale_");
  VecDesc d;
  d.dtype = x.dtype();
  d.n = x.numel();
  d.scale = s;
  KILN_SCALE(x.device().type, d, x.data_ptr());
}

}  // namespace ops

// --- registration
namespace {

void ref_sgd(const SGDStepDesc& d, void* p, const void* g, void* b) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    ref::sgd_step<T>(d, static_cast<T*>(p), static_cast<const T*>(g), static_cast<T*>(b));
  });
}
void ref_adam(const AdamStepDesc& d, void* p, const void* g, void* m, void* v) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    ref::adam_step<T>(d, static_cast<T*>(p), static_cast<const T*>(g), static_cast<T*>(m), static_cast<T*>(v));
  });
}
void ref_lars(const LarsStepDesc& d, void* p, const void* g, void* b) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    ref::lars_step<T>(d, static_cast<T*>(p), static_cast<const T*>(g), static_cast<T*>(b));
  });
}
void ref_sum_squares(const VecDesc& d, const void* x, double* out) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    ref::sum_squares<T>(d, static_cast<const T*>(x), out);
  });
}
void ref_scale(const VecDesc& d, void* x) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    ref::scale<T>(d, static_cast<T*>(x));
  });
}

}  // namespace

void register_optim_kernels(Registry& r) {
  constexpr auto cpu = DeviceType::cpu;
  auto& sgd = r.op<SGDStepDesc, void*, const void*, void*>("optim_sgd");
  sgd.add("native", cpu, native::supports_optim_sgd, native::sgd_step);
  sgd.add("ref", cpu, native::supports_optim_sgd, ref_sgd);
  auto& adam = r.op<AdamStepDesc, void*, const void*, void*, void*>("optim_adam");
  adam.add("native", cpu, native::supports_optim_adam, native::adam_step);
  adam.add("ref", cpu, native::supports_optim_adam, ref_adam);
  auto& lars = r.op<LarsStepDesc, void*, const void*, void*>("optim_lars");
  lars.add("native", cpu, native::supports_optim_lars, native::lars_step);
  lars.add("ref", cpu, native::supports_optim_lars, ref_lars);
  auto& ss = r.op<VecDesc, const void*, double*>("optim_sum_squares");
  ss.add("native", cpu, native::supports_optim_vec, native::sum_squares);
  ss.add("ref", cpu, native::supports_optim_vec, ref_sum_squares);
  auto& sc = r.op<VecDesc, void*>("optim_scale");
  sc.add("native", cpu, native::supports_optim_vec, native::scale);
  sc.add("ref", cpu, native::supports_optim_vec, ref_scale);
}

}  // namespace kiln
