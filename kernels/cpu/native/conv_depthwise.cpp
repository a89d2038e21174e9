// Direct depthwise convolution (groups == C, K = C * multiplier, weights [K, 1, R, S]): forward,
// backward-data and backward-weights (+ bias) for NCHW and NHWC, float32. im2col would copy
// R*S times the input to feed GEMMs with one row of weights per group (M = multiplier, K = R*S):
// the GEMM cannot block such a product, and the copy costs more than the arithmetic. Here every
// output is summed straight from the input.
//   NCHW: one (image, channel) plane per task; each tap (r, s) is a multiply-add over a row
//         segment (contiguous when stride_w == 1, which the compiler vectorises).
//   NHWC: one (image, row) per task, vectorised over the channels with the weights transposed
//         to [R*S, K] once per call; backward-data gathers from the outputs that read each input
//         pixel (no races, no atomics).
// Backward-weights (and the bias gradient) sums over the batch in a fixed order: NCHW by output
// channel; NHWC in kParts fixed slices of the (image, row) pairs reduced in slice order. Results
// do not depend on the thread count. The loops live in conv_depthwise_kernels.inc, compiled here
// for the baseline ISA and in conv_depthwise_<isa>.cpp for AVX-512F, AVX2 and SVE (picked by
// kernel_paths(cpu_isa()).conv_depthwise).
//   Test: ctest --test-dir build -R "test_conv_depthwise|conv"    Bench: build/bench/bench_conv
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/common/env.h"
#include "kernels/common/error.h"
#include "kernels/common/parallel.h"
#include "kernels/cpu/native/conv.h"
#include "kernels/cpu/native/conv_depthwise_internal.h"
#include "kernels/cpu/native/cpu_features.h"

namespace kiln::native {

namespace dw_base {
#include "kernels/cpu/native/conv_depthwise_kernels.inc"
}  // namespace dw_base

namespace {

constexpr int64_t kParts = 16;  // fixed slices of the NHWC weight-gradient reduction

// Output positions q whose input position q*stride - pad + offset lies in [0, in): [lo, hi).
void valid(int64_t in, int64_t out, int64_t stride, int64_t pad, int64_t offset, int64_t& lo, int64_t& hi) {
  auto first_at_least = [&](int64_t bound) { return bound <= 0 ? 0 : (bound + stride - 1) / stride; };
  lo = std::min(out, first_at_least(pad - offset));
  hi = std::max(lo, std::min(out, first_at_least(in + pad - offset)));
}

// Owns what a DwPlan points to.
struct Plan {
  std::vector<int64_t> p0, p1, q0, q1;
  std::vector<float> wt, partial, part;
  std::vector<double> acc;
  DwPlan pl{};
  Plan(const ConvDesc& d, const float* wei, bool transposed_weights)
      : p0(size_t(d.R)), p1(size_t(d.R)), q0(size_t(d.S)), q1(size_t(d.S)) {
    for (int64_t r = 0; r < d.R; ++r) valid(d.H, d.P, d.stride_h, d.pad_h, r * d.dilation_h, p0[size_t(r)], p1[size_t(r)]);
    for (int64_t s = 0; s < d.S; ++s) valid(d.W, d.Q, d.stride_w, d.pad_w, s * d.dilation_w, q0[size_t(s)], q1[size_t(s)]);
    if (transposed_weights && wei) {  // [K, R*S] -> [R*S, K]
      const int64_t RS = d.R * d.S;
      wt.resize(size_t(RS * d.K));
      for (int64_t k = 0; k < d.K; ++k)
        for (int64_t i = 0; i < RS; ++i) wt[size_t(i * d.K + k)] = wei[k * RS + i];
    }
    pl.p0 = p0.data(), pl.p1 = p1.data(), pl.q0 = q0.data(), pl.q1 = q1.data(), pl.wt = wt.data();
  }
};

// One build of the kernel set.
struct DwKernels {
  const char* name;
  decltype(&dw_base::fwd_nchw) fwd_nchw;
  decltype(&dw_base::bwd_data_nchw) bwd_data_nchw;
  decltype(&dw_base::bwd_weights_nchw) bwd_weights_nchw;
  decltype(&dw_base::fwd_nhwc) fwd_nhwc;
  decltype(&dw_base::bwd_data_nhwc) bwd_data_nhwc;
  decltype(&dw_base::bwd_weights_nhwc) bwd_weights_nhwc;
};
#define KILN_DW_SET(name, ns)                                                                               \
  DwKernels {                                                                                               \
    name, ns::fwd_nchw, ns::bwd_data_nchw, ns::bwd_weights_nchw, ns::fwd_nhwc, ns::bwd_data_nhwc,           \
        ns::bwd_weights_nhwc                                                                                \
  }
const DwKernels kSets[] = {KILN_DW_SET("avx512", dw_avx512), KILN_DW_SET("avx2", dw_avx2), KILN_DW_SET("sve", dw_sve),
                           KILN_DW_SET("baseline", dw_base)};
#undef KILN_DW_SET

const DwKernels* find_set(const std::string& name) {
  for (const DwKernels& k : kSets)
    if (name == k.name) return &k;
  return nullptr;
}

std::atomic<const DwKernels*> g_set{nullptr};

const DwKernels& kernels() {
  const DwKernels* k = g_set.load(std::memory_order_acquire);
  if (!k) {
    k = find_set(kernel_paths(cpu_isa()).conv_depthwise);
    if (!k || !conv_depthwise_path_available(k->name)) k = find_set("baseline");
    g_set.store(k, std::memory_order_release);
  }
  return *k;
}

}  // namespace

const char* conv_depthwise_path() { return kernels().name; }

bool conv_depthwise_path_available(const std::string& name) {
  const CpuArch arch = build_arch();
  if (name == "baseline") return true;
  if (name == "avx512") return arch == CpuArch::x86_64 && has_avx512f();
  if (name == "avx2") return arch == CpuArch::x86_64 && has_avx2();
  if (name == "sve") return arch == CpuArch::aarch64 && cpu_isa().sve;
  return false;
}

void set_conv_depthwise_path(const std::string& name) {
  if (name == "auto") {
    g_set.store(nullptr, std::memory_order_release);
    return;
  }
  const DwKernels* k = find_set(name);
  KILN_CHECK(k, "set_conv_depthwise_path: unknown path '", name, "' (avx512, avx2, sve, baseline or auto)");
  KILN_CHECK(conv_depthwise_path_available(name), "set_conv_depthwise_path: ", name,
             " is not available here (CPU features: ", cpu_features_str(), ")");
  g_set.store(k, std::memory_order_release);
}

bool is_depthwise(const ConvDesc& d) {
  // KILN_CONV_DEPTHWISE=0 sends depthwise layers down the im2col path (to compare the two).
  static const bool enabled = env_flag("KILN_CONV_DEPTHWISE", true);
  return enabled && d.dtype == DType::float32 && d.groups > 1 && d.groups == d.C && d.K % d.C == 0;
}

void conv2d_fwd_depthwise(const ConvDesc& d, const float* src, const float* wei, const float* bias, float* dst) {
  KILN_CHECK(is_depthwise(d), "conv2d_fwd (native depthwise): not depthwise: ", d.str());
  if (d.N * d.K * d.P * d.Q == 0) return;
  const Plan p(d, wei, d.nhwc);
  if (d.nhwc) kernels().fwd_nhwc(d, p.pl, src, bias, dst);
  else kernels().fwd_nchw(d, p.pl, src, wei, bias, dst);
}

void conv2d_bwd_data_depthwise(const ConvDesc& d, const float* diff_dst, const float* wei, float* diff_src) {
  KILN_CHECK(is_depthwise(d), "conv2d_bwd_data (native depthwise): not depthwise: ", d.str());
  if (d.N * d.C * d.H * d.W == 0) return;
  const Plan p(d, wei, d.nhwc);
  if (d.nhwc) kernels().bwd_data_nhwc(d, p.pl, diff_dst, diff_src);
  else kernels().bwd_data_nchw(d, p.pl, diff_dst, wei, diff_src);
}

void conv2d_bwd_weights_depthwise(const ConvDesc& d, const float* src, const float* diff_dst, float* diff_wei,
                                  float* diff_bias) {
  KILN_CHECK(is_depthwise(d), "conv2d_bwd_weights (native depthwise): not depthwise: ", d.str());
  if (!diff_wei && !diff_bias) return;
  const int64_t RS = d.R * d.S, K = d.K;
  Plan p(d, nullptr, false);
  if (!d.nhwc) {
    p.acc.resize(size_t(K * RS));
    p.part.resize(size_t(K * RS * d.Q));
    p.pl.acc = p.acc.data(), p.pl.part = p.part.data();
    kernels().bwd_weights_nchw(d, p.pl, src, diff_dst, diff_wei, diff_bias);
    return;
  }
  const int64_t parts = std::max<int64_t>(1, std::min(kParts, d.N * d.P));
  p.partial.assign(size_t(parts * (RS + 1) * K), 0.f);
  p.pl.partial = p.partial.data(), p.pl.parts = parts;
  kernels().bwd_weights_nhwc(d, p.pl, src, diff_dst);
  // Slices added in order: the same bits for any thread count.
  float* total = p.partial.data();
  for (int64_t part = 1; part < parts; ++part) {
    const float* sl = total + part * (RS + 1) * K;
    for (int64_t i = 0; i < (RS + 1) * K; ++i) total[i] += sl[i];
  }
  if (diff_wei)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t i = 0; i < RS; ++i) diff_wei[k * RS + i] = total[i * K + k];
  if (diff_bias) std::memcpy(diff_bias, total + RS * K, sizeof(float) * size_t(K));
}

}  // namespace kiln::native
