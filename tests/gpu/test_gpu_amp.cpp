// Mixed precision on a GPU (real, or the emulated device: there without the cuDNN-only checks):
// float16/bfloat16 convolution (float32 bias, fused ReLU, NCHW and
// NHWC), Linear and batch norm on CUDA against float32 on the CPU for the same (half-rounded)
// values, forward and backward; that the half types reach cuDNN/cuBLAS (no float32 fallback)
// and that cuDNN's chosen convolution algorithm may use tensor cores (its mathType reported); and
// a mixed-precision training step of a small net with GradScaler: it matches a float32 CPU step,
// skips a step with a planted inf and backs the scale off, grows it after the interval.
// Skipped without a device (tests/gpu/main.cpp).
// Tolerances (inputs are rounded to the half type first, so both sides see the same values; the
// CPU computes in float32):
//  - float16: float32 accumulation, each half output rounded once or twice (the three-call bias
//    path rounds the convolution, then conv + bias): 2 ulp = 2 * 2^-11 ~ 1e-3 relative; rtol 4e-3
//    and atol 4e-3 * sqrt(reduction length) for sums that cancel. The bias gradient is summed
//    in float32 from half diff_dst (by cuDNN, or kiln's CUDA reduction where cuDNN declines, as
//    for bfloat16): the same rtol, with room to spare.
//  - bfloat16: the same with 8 mantissa bits (2^-8 ~ 3.9e-3): rtol 3e-2, atol 3e-2 * sqrt(len).
//  - batch norm: statistics in float32 inside cuDNN, x and y half: rtol as above, atol rtol * 4
//    (normalised outputs are O(1)); running statistics float32: 1e-4 relative.
//  - a training step: gradients from half activations: each parameter's update within 5 %
//    (float16) / 15 % (bfloat16) of the float32 update's norm (relative L2), or 3x the motion of
//    the float32 update when the input moves by one ulp of the half type, where that is larger
//    (half activations flip ReLUs near zero).
//   ctest --test-dir build -L gpu -R amp --output-on-failure
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "engine/amp.h"
#include "engine/dispatch.h"
#include "engine/ops/conv.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/linalg.h"
#include "engine/ops/loss.h"
#include "engine/ops/norm.h"
#include "engine/ops/reduce.h"
#include "engine/optim.h"
#include "engine/random.h"
#include "kernels/common/conv.h"
#include "kernels/common/gemm.h"
#include "kernels/common/linear.h"
#include "kernels/common/norm.h"
#if defined(KILN_HAVE_CUDNN)
#include "kernels/cuda/cudnn/conv.h"
#include "kernels/cuda/cudnn/handles.h"
#include "kernels/cuda/cudnn/mapping.h"
#endif
#include "layers/activation.h"
#include "layers/conv.h"
#include "layers/linear.h"
#include "layers/module.h"
#include "layers/norm.h"
#include "tests/support/testing.h"

using namespace kiln;

namespace {

const Device kGpu("cuda:0");

double rtol_for(DType t) { return t == DType::float16 ? 4e-3 : 3e-2; }

// Uniform values rounded to `t`, as a float32 CPU tensor (what both sides compute on).
Tensor rounded(const Shape& s, uint64_t seed, DType t, double lo = -1, double hi = 1) {
  return test::make_input(s, seed, DType::float32, lo, hi).to(t).to(DType::float32);
}

// `t` (float32, CPU) as a half-type leaf on the GPU, channels-last when asked.
Tensor on_gpu(const Tensor& t, DType dt, bool channels_last = false) {
  Tensor g = t.to(dt).to(kGpu);
  if (channels_last) g = g.contiguous(MemoryFormat::channels_last);
  return g.detach().requires_grad_();
}

Tensor to_host(const Tensor& t) { return t.detach().to(Device()).to(DType::float64); }

void check_close(const Tensor& gpu, const Tensor& cpu, double rtol, double atol, const char* what) {
  CAPTURE(what);
  REQUIRE(gpu.defined());
  REQUIRE(cpu.defined());
  CHECK_CLOSE(to_host(gpu), cpu.detach().to(DType::float64), rtol, atol);
}

bool device_has(DType t) {
#if defined(KILN_HAVE_CUDNN)
  if (cudnn::device_supports(t)) return true;
  // This file then reports Skipped (unless a case failed), naming what the device lacks.
  kiln::test::skip_not_built(std::string(dtype_name(t)) + " in cuDNN/cuBLAS", "this device does not offer it");
  return false;
#else
  (void)t;  // kiln's own CUDA kernels take both half types on every device
  return true;
#endif
}

}  // namespace

#if defined(KILN_HAVE_CUDNN)  // cuDNN's algorithm and math type
TEST_CASE("amp conv: half conv2d with float32 bias and fused ReLU on cuDNN tensor cores, vs float32 on the CPU") {
  cudnn::set_allow_tf32(false);
  cudnn::set_benchmark(false);
  for (DType t : {DType::float16, DType::bfloat16}) {
    if (!device_has(t)) continue;
    for (bool nhwc : {false, true})
      for (bool relu : {false, true}) {
        const std::string dtype = dtype_name(t);
    CAPTURE(dtype);
        CAPTURE(nhwc);
        CAPTURE(relu);
        const int64_t N = 4, C = 16, H = 13, W = 11, K = 32, R = 3;
        Tensor x = rounded({N, C, H, W}, 1, t), w = rounded({K, C, R, R}, 2, t, -0.3, 0.3),
               b = rounded({K}, 3, t);
        Tensor xc = x.detach().requires_grad_(), wc = w.detach().requires_grad_(), bc = b.detach().requires_grad_();
        Tensor xg = on_gpu(x, t, nhwc), wg = on_gpu(w, t), bg = on_gpu(b, t);
        Tensor yc = relu ? ops::conv2d_relu(xc, wc, bc, 1, 1) : ops::conv2d(xc, wc, bc, 1, 1);
        Tensor yg = relu ? ops::conv2d_relu(xg, wg, bg, 1, 1) : ops::conv2d(xg, wg, bg, 1, 1);
        CHECK(yg.dtype() == t);
        CHECK(yg.device() == kGpu);
        const double rtol = rtol_for(t);
        check_close(yg, yc, rtol, rtol * std::sqrt(double(C * R * R)), "forward");

        // The half problem reached cuDNN (not the float32 fallback) with tensor-core math.
        ConvDesc d;
        d.dtype = t;
        d.N = N, d.C = C, d.H = H, d.W = W, d.K = K, d.R = d.S = R;
        d.pad_h = d.pad_w = 1;
        d.has_bias = true;
        d.nhwc = nhwc;
        d.set_output_size();
        const auto* impl = find_kernel<kernel_op::conv2d_fwd>(DeviceType::cuda, d);
        REQUIRE(impl != nullptr);
        CHECK(backend_name(impl->backend) == "cudnn");
        d.relu = relu;
        const cudnn::ConvAlgoUsed u = cudnn::conv_algo_used(d, 0);
        // doctest prints a const char* as a pointer: strings only.
        MESSAGE(dtype << std::string(nhwc ? " nhwc" : " nchw") << std::string(relu ? " +relu" : "")
                      << ": forward algo " << u.algo << " math " << std::string(cudnn::math_type_name(u.math))
                      << " (descriptor " << std::string(cudnn::math_type_name(u.descriptor_math)) << ")"
                      << std::string(u.fused ? ", fused bias+relu" : ""));
        CHECK(u.algo >= 0);
        CHECK(u.descriptor_math == 1);  // CUDNN_TENSOR_OP_MATH requested for half data
        CHECK(u.math != 3);             // never an FMA-only (no tensor core) algorithm

        // Backward: the same upstream gradient on both sides.
        Tensor gy = rounded(yc.sizes(), 4, t);
        yc.backward(gy);
        yg.backward(gy.to(t).to(kGpu));
        const double npq = double(N * d.P * d.Q);
        check_close(xg.grad(), xc.grad(), rtol, rtol * std::sqrt(double(K * R * R)), "diff_src");
        check_close(wg.grad(), wc.grad(), rtol, rtol * std::sqrt(npq), "diff_wei");
        check_close(bg.grad(), bc.grad(), rtol, rtol * std::sqrt(npq), "diff_bias");
        // Each backward pass picks its layout as the op layer does (engine/ops/conv.cpp
        // pick_layout): NHWC where a kernel takes it, else NCHW. cuDNN 9 offers no NHWC backward
        // algorithm for kiln's KCRS weights, so an NHWC problem's backward passes run cuDNN's NCHW
        // plan: that plan is the one to ask, and it must be cuDNN's (the half problem, no float32
        // fallback).
        ConvDesc bd = d;
        bd.relu = false;
        ConvDesc bdd = bd, bdw = bd;
        if (!find_kernel<kernel_op::conv2d_bwd_data>(DeviceType::cuda, bdd)) bdd.nhwc = false;
        if (!find_kernel<kernel_op::conv2d_bwd_weights>(DeviceType::cuda, bdw)) bdw.nhwc = false;
        const auto* impl_d = find_kernel<kernel_op::conv2d_bwd_data>(DeviceType::cuda, bdd);
        const auto* impl_w = find_kernel<kernel_op::conv2d_bwd_weights>(DeviceType::cuda, bdw);
        REQUIRE(impl_d != nullptr);
        REQUIRE(impl_w != nullptr);
        CHECK(backend_name(impl_d->backend) == "cudnn");
        CHECK(backend_name(impl_w->backend) == "cudnn");
        const cudnn::ConvAlgoUsed ud = cudnn::conv_algo_used(bdd, 1), uw = cudnn::conv_algo_used(bdw, 2);
        MESSAGE("  backward-data " << std::string(bdd.nhwc ? "nhwc" : "nchw") << " algo " << ud.algo << " math "
                                   << std::string(cudnn::math_type_name(ud.math)) << "; backward-weights "
                                   << std::string(bdw.nhwc ? "nhwc" : "nchw") << " algo " << uw.algo << " math "
                                   << std::string(cudnn::math_type_name(uw.math)) << "; bias gradient summed by "
                                   << std::string(uw.bias_grad_cudnn ? "cuDNN" : "kiln's CUDA reduction")
                                   << " in float32");
        CHECK(ud.algo >= 0);
        CHECK(uw.algo >= 0);
      }
  }
}

#endif  // KILN_HAVE_CUDNN

TEST_CASE("amp conv layer: float32 master weights, half input: half output, float32 master gradients") {
  for (DType t : {DType::float16, DType::bfloat16}) {
    if (!device_has(t)) continue;
    const std::string dtype = dtype_name(t);
    CAPTURE(dtype);
    Conv2d cpu(8, 12, 3, 1, 1), gpu(8, 12, 3, 1, 1);
    // Master weights already representable in t: both sides use the same values.
    NamedTensors sd = cpu.state_dict();
    for (auto& [name, v] : sd) v = v.to(t).to(DType::float32);
    cpu.load_state_dict(sd);
    gpu.load_state_dict(sd);
    gpu.to(kGpu);
    Tensor x = rounded({3, 8, 10, 9}, 5, t);
    Tensor yc = cpu(x), yg = gpu(x.to(t).to(kGpu));
    CHECK(yg.dtype() == t);
    const double rtol = rtol_for(t);
    check_close(yg, yc, rtol, rtol * std::sqrt(72.0), "forward");
    Tensor gy = rounded(yc.sizes(), 6, t);
    yc.backward(gy);
    yg.backward(gy.to(t).to(kGpu));
    for (const auto& entry : gpu.named_parameters()) {
      const std::string& name = entry.first;
      const Tensor& p = entry.second;
      CAPTURE(name);
      CHECK(p.grad().dtype() == DType::float32);
      CHECK(p.grad().device() == kGpu);
    }
    const NamedTensors pc = cpu.named_parameters(), pg = gpu.named_parameters();
    for (size_t i = 0; i < pc.size(); ++i)
      check_close(pg[i].second.grad(), pc[i].second.grad(), rtol, rtol * std::sqrt(3.0 * 10 * 9), pc[i].first.c_str());
  }
}

TEST_CASE("amp linear: half inner product on cuBLAS with float32 accumulation, vs float32 on the CPU") {
#if defined(KILN_HAVE_CUDNN)
  cudnn::set_allow_tf32(false);
#endif
  for (DType t : {DType::float16, DType::bfloat16}) {
    if (!device_has(t)) continue;
    const std::string dtype = dtype_name(t);
    CAPTURE(dtype);
    const int64_t n = 37, ic = 129, oc = 33;
    // The half problem runs as it is: a linear candidate and a cuBLAS gemm take it.
    LinearDesc ld;
    ld.dtype = t;
    ld.n = n;
    ld.ic = ic;
    ld.oc = oc;
    ld.has_bias = true;
    CHECK(find_kernel<kernel_op::linear_fwd>(DeviceType::cuda, ld));
    GemmDesc gd;
    gd.dtype = t;
    gd.m = n;
    gd.n = oc;
    gd.k = ic;
    gd.trans_b = true;
    gd.lda = ic;
    gd.ldb = ic;
    gd.ldc = oc;
    const auto* g = find_kernel<kernel_op::gemm>(DeviceType::cuda, gd);
    REQUIRE(g != nullptr);
#if defined(KILN_HAVE_CUDNN)
    CHECK(backend_name(g->backend) == "cudnn");
#endif

    Tensor x = rounded({n, ic}, 7, t), w = rounded({oc, ic}, 8, t, -0.2, 0.2), b = rounded({oc}, 9, t);
    Tensor xc = x.detach().requires_grad_(), wc = w.detach().requires_grad_(), bc = b.detach().requires_grad_();
    Tensor xg = on_gpu(x, t), wg = on_gpu(w, t), bg = on_gpu(b, t);
    Tensor yc = ops::linear(xc, wc, bc), yg = ops::linear(xg, wg, bg);
    CHECK(yg.dtype() == t);
    const double rtol = rtol_for(t);
    check_close(yg, yc, rtol, rtol * std::sqrt(double(ic)), "forward");
    Tensor gy = rounded(yc.sizes(), 10, t);
    yc.backward(gy);
    yg.backward(gy.to(t).to(kGpu));
    CHECK(xg.grad().dtype() == t);
    check_close(xg.grad(), xc.grad(), rtol, rtol * std::sqrt(double(oc)), "diff_src");
    check_close(wg.grad(), wc.grad(), rtol, rtol * std::sqrt(double(n)), "diff_wei");
    check_close(bg.grad(), bc.grad(), rtol, rtol * std::sqrt(double(n)), "diff_bias");

    // The layer: float32 masters on the GPU, half input, float32 gradients.
    Linear lc(ic, oc), lg(ic, oc);
    NamedTensors sd = lc.state_dict();
    for (auto& [name, v] : sd) v = v.to(t).to(DType::float32);
    lc.load_state_dict(sd);
    lg.load_state_dict(sd);
    lg.to(kGpu);
    Tensor zc = lc(x), zg = lg(x.to(t).to(kGpu));
    CHECK(zg.dtype() == t);
    check_close(zg, zc, rtol, rtol * std::sqrt(double(ic)), "layer forward");
    zc.backward(gy);
    zg.backward(gy.to(t).to(kGpu));
    const NamedTensors pc = lc.named_parameters(), pg = lg.named_parameters();
    for (size_t i = 0; i < pc.size(); ++i) {
      CAPTURE(pc[i].first);
      CHECK(pg[i].second.grad().dtype() == DType::float32);
      check_close(pg[i].second.grad(), pc[i].second.grad(), rtol, rtol * std::sqrt(double(n)), "layer gradient");
    }
  }
}

TEST_CASE("amp batch norm: half data, float32 parameters and statistics, on cuDNN, vs float32 on the CPU") {
  for (DType t : {DType::float16, DType::bfloat16}) {
    if (!device_has(t)) continue;
    for (bool nhwc : {false, true}) {
      const std::string dtype = dtype_name(t);
    CAPTURE(dtype);
      CAPTURE(nhwc);
      const int64_t N = 8, C = 6;
      Tensor x = rounded({N, C, 5, 7}, 11, t, -2, 3);
      Tensor wt = test::make_input({C}, 12, DType::float32, 0.5, 1.5), bs = test::make_input({C}, 13, DType::float32);
      Tensor xc = x.detach().requires_grad_(), wc = wt.detach().requires_grad_(), bc = bs.detach().requires_grad_();
      Tensor xg = on_gpu(x, t, nhwc), wg = wt.to(kGpu).detach().requires_grad_(),
             bg = bs.to(kGpu).detach().requires_grad_();
      Tensor rmc = zeros({C}), rvc = ones({C});
      Tensor rmg = rmc.to(kGpu), rvg = rvc.to(kGpu);

      BatchNormDesc d;
      d.dtype = t;
      d.N = N;
      d.C = C;
      d.S = 35;
      d.nhwc = nhwc;
      d.training = true;
      const auto* impl = find_kernel<kernel_op::batch_norm_fwd>(DeviceType::cuda, d);
      REQUIRE(impl != nullptr);
#if defined(KILN_HAVE_CUDNN)
      CHECK(backend_name(impl->backend) == "cudnn");
#endif

      Tensor yc = ops::batch_norm(xc, wc, bc, rmc, rvc, true, 0.1, 1e-5);
      Tensor yg = ops::batch_norm(xg, wg, bg, rmg, rvg, true, 0.1, 1e-5);
      CHECK(yg.dtype() == t);
      const double rtol = rtol_for(t);
      check_close(yg, yc, rtol, 4 * rtol, "forward");
      check_close(rmg, rmc, 1e-4, 1e-5, "running_mean");
      check_close(rvg, rvc, 1e-4, 1e-5, "running_var");
      Tensor gy = rounded(yc.sizes(), 14, t);
      yc.backward(gy);
      yg.backward(gy.to(t).to(kGpu));
      CHECK(wg.grad().dtype() == DType::float32);
      check_close(xg.grad(), xc.grad(), rtol, 4 * rtol, "diff_src");
      check_close(wg.grad(), wc.grad(), rtol, rtol * std::sqrt(double(N * 35)), "diff_weight");
      check_close(bg.grad(), bc.grad(), rtol, rtol * std::sqrt(double(N * 35)), "diff_bias");
    }
  }
}

namespace {

std::shared_ptr<Sequential> small_net() {
  auto net = std::make_shared<Sequential>();
  net->add(make<Conv2d>(3, 8, 3, 1, 1));
  net->add(make<BatchNorm2d>(8));
  net->add(make<ReLU>());
  net->add(make<Conv2d>(8, 8, 3, 2, 1));
  net->add(make<ReLU>());
  net->add(make<Flatten>());
  net->add(make<Linear>(8 * 4 * 4, 10));
  return net;
}

// Parameters after minus before, per parameter, on the CPU in float64.
std::vector<Tensor> updates(const NamedTensors& before, const Module& m) {
  std::vector<Tensor> u;
  const NamedTensors after = m.named_parameters();
  for (size_t i = 0; i < after.size(); ++i) u.push_back(to_host(after[i].second) - to_host(before[i].second));
  return u;
}

NamedTensors snapshot(const Module& m) {
  NamedTensors s;
  for (const auto& [name, p] : m.named_parameters()) s.push_back({name, p.detach().to(Device()).clone()});
  return s;
}

}  // namespace

TEST_CASE("amp training step: small net in half on the GPU with GradScaler vs float32 on the CPU; inf backs off") {
  for (DType t : {DType::float16, DType::bfloat16}) {
    if (!device_has(t)) continue;
    const std::string dtype = dtype_name(t);
    CAPTURE(dtype);
    manual_seed(3);
    auto cpu = small_net(), gpu = small_net(), probe = small_net();
    NamedTensors sd = cpu->state_dict();  // weights the half type holds exactly, as in the layer tests
    for (auto& [name, v] : sd) v = v.to(t).to(DType::float32);
    cpu->load_state_dict(sd);
    gpu->load_state_dict(sd);
    probe->load_state_dict(sd);
    gpu->to(kGpu);
    auto opt_c = optim::sgd(cpu->named_parameters(), {0.1});
    auto opt_g = optim::sgd(gpu->named_parameters(), {0.1});
    amp::GradScalerOptions so;
    so.init_scale = 1024;
    so.growth_interval = 2;
    amp::GradScaler scaler(so);

    Tensor x = rounded({6, 3, 8, 8}, 21, t);
    std::vector<double> labels = {0, 3, 9, 1, 4, 7};
    Tensor y = from_vector(labels, {6}, TensorOptions(DType::int64));

    // Step 1: float32 CPU reference and the mixed-precision GPU step from the same weights.
    const NamedTensors before_c = snapshot(*cpu), before_g = snapshot(*gpu);
    opt_c->zero_grad();
    Tensor lc = ops::cross_entropy((*cpu)(x), y);
    lc.backward();
    opt_c->step();

    opt_g->zero_grad();
    Tensor out = (*gpu)(x.to(t).to(kGpu));
    CHECK(out.dtype() == t);
    Tensor lg = ops::cross_entropy(out.to(DType::float32), y.to(kGpu));  // the loss in float32, as AMP does
    CHECK(std::fabs(lg.item() - lc.item()) <= (t == DType::float16 ? 1e-2 : 5e-2) * std::fabs(lc.item()));
    scaler.scale(lg).backward();
    for (const auto& entry : gpu->named_parameters()) {
      const std::string& name = entry.first;
      const Tensor& p = entry.second;
      CAPTURE(name);
      CHECK(p.grad().dtype() == DType::float32);  // float32 master gradients
    }
    CHECK(scaler.step(*opt_g));
    scaler.update();
    CHECK_FALSE(scaler.found_inf());
    CHECK(scaler.growth_tracker() == 1);
    CHECK(scaler.get_scale() == 1024.0);
    // Per parameter, the update's relative L2 distance from the float32 one: half activations flip
    // a few ReLUs near zero, which moves single elements by their whole size (an elementwise bound
    // fails on those), while a broken kernel moves the whole update. A parameter whose float32
    // update vanishes (a convolution bias before batch norm) is measured against the largest
    // update of the net instead of its own.
    const std::vector<Tensor> uc = updates(before_c, *cpu), ug = updates(before_g, *gpu);
    // The float32 update's own sensitivity: the same CPU step on the input moved by one ulp of the
    // half type (relative). The tolerance is the larger of a fixed bound and 3x that motion.
    auto opt_p = optim::sgd(probe->named_parameters(), {0.1});
    const double ulp = t == DType::float16 ? 1.0 / 2048 : 1.0 / 256;
    opt_p->zero_grad();
    ops::cross_entropy((*probe)(ops::add(x, ops::mul(ops::mul(x, test::make_input(x.sizes(), 22, DType::float32)), ulp))),
                       y)
        .backward();
    opt_p->step();
    const std::vector<Tensor> up = updates(before_c, *probe);
    const double fixed = t == DType::float16 ? 5e-2 : 1.5e-1;
    double largest = 0;
    for (const Tensor& u : uc) largest = std::max(largest, std::sqrt(ops::sum(ops::square(u)).item()));
    for (size_t i = 0; i < uc.size(); ++i) {
      CAPTURE(before_c[i].first);
      const double norm = std::sqrt(ops::sum(ops::square(uc[i])).item());
      const double scale = std::max(norm, 1e-2 * largest);
      const double dist = std::sqrt(ops::sum(ops::square(ops::sub(ug[i], uc[i]))).item());
      const double noise = std::sqrt(ops::sum(ops::square(ops::sub(up[i], uc[i]))).item()) / scale;
      const double rel = std::max(fixed, 3 * noise);
      CHECK_MESSAGE(dist <= rel * scale, "update differs by " << dist / scale << " relative (tolerance " << rel
                                                               << "; one-ulp input motion " << noise << ")");
    }

    // Step 2: clean, so the scale grows (interval 2).
    opt_g->zero_grad();
    scaler.scale(ops::cross_entropy((*gpu)(x.to(t).to(kGpu)).to(DType::float32), y.to(kGpu))).backward();
    CHECK(scaler.step(*opt_g));
    scaler.update();
    CHECK(scaler.get_scale() == 2048.0);
    CHECK(scaler.growth_tracker() == 0);

    // Step 3: a planted inf in one gradient: the step is skipped, the scale backs off.
    opt_g->zero_grad();
    scaler.scale(ops::cross_entropy((*gpu)(x.to(t).to(kGpu)).to(DType::float32), y.to(kGpu))).backward();
    const NamedTensors held = snapshot(*gpu);
    Tensor victim = gpu->named_parameters()[0].second;
    std::vector<double> v = victim.grad().to_vector();
    v[0] = std::numeric_limits<double>::infinity();
    victim.set_grad(from_vector(v, victim.sizes()).to(kGpu));
    CHECK_FALSE(scaler.step(*opt_g));
    CHECK(scaler.found_inf());
    scaler.update();
    CHECK(scaler.get_scale() == 1024.0);
    CHECK(scaler.growth_tracker() == 0);
    const NamedTensors now = gpu->named_parameters();
    for (size_t i = 0; i < now.size(); ++i) {
      CAPTURE(now[i].first);
      CHECK(to_host(now[i].second).to_vector() == to_host(held[i].second).to_vector());  // not stepped
    }
  }
}


