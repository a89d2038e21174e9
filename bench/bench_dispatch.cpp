// Micro-benchmark of the dispatcher's cost per call, the part of an op that is neither argument
// checks nor the kernel: choosing the candidate for (op, device, descriptor) under the current
// preference, and calling it.
//   - choose: find_kernel<kernel_op::unary> for one relu, and find_kernel<kernel_op::conv2d_fwd> over the distinct convolutions of ResNet-50 at batch 1
//     (NCHW and channels-last), in network order, as a forward pass asks for them; under `auto`
//     and under an explicit list ("native,ref");
//   - call: dispatch of an op of this file whose kernel does nothing, with a ConvDesc and with a
//     UnaryDesc (the largest descriptor, 330 bytes), against a direct call through a function
//     pointer: the difference is the dispatcher's overhead;
//   - the same with a BackendGuard opened per call, as a Module with its own backend does.
// Medians over repeats of ns per call, one thread.
//   cmake --build build --target bench_dispatch && build/bench/bench_dispatch
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "engine/dispatch.h"

using namespace kiln;

namespace {

KILN_DECLARE_KERNEL_OP(bench_noop_conv, "bench.noop_conv", ConvDesc, void* dst);
KILN_DECLARE_KERNEL_OP(bench_noop_unary, "bench.noop_unary", UnaryDesc, void* dst);

void noop_conv(const ConvDesc&, void* dst) { *static_cast<int*>(dst) += 1; }
void noop_unary(const UnaryDesc&, void* dst) { *static_cast<int*>(dst) += 1; }

double median(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// ns per call of f(i) over `calls` calls, median of `repeats`.
template <class F>
double ns_per_call(int calls, int repeats, const F& f) {
  std::vector<double> t;
  for (int r = 0; r < repeats; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) f(i);
    t.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / calls);
  }
  return median(t);
}

ConvDesc conv(int64_t c, int64_t hw, int64_t k, int64_t r, int64_t stride, bool nhwc) {
  ConvDesc d;
  d.N = 1, d.C = c, d.H = d.W = hw, d.K = k, d.R = d.S = r;
  d.stride_h = d.stride_w = stride;
  d.pad_h = d.pad_w = r / 2;
  d.has_bias = false;
  d.nhwc = nhwc;
  d.set_output_size();
  return d;
}

// The convolutions of ResNet-50 (torchvision, stride on the 3x3) at 224x224, in forward order.
std::vector<ConvDesc> resnet50_convs(bool nhwc) {
  std::vector<ConvDesc> out{conv(3, 224, 64, 7, 2, nhwc)};
  const int64_t widths[] = {64, 128, 256, 512}, blocks[] = {3, 4, 6, 3};
  int64_t in = 64, hw = 56;
  for (int s = 0; s < 4; ++s) {
    const int64_t w = widths[s], o = 4 * w;
    for (int64_t b = 0; b < blocks[s]; ++b) {
      const int64_t stride = (b == 0 && s > 0) ? 2 : 1;
      out.push_back(conv(in, hw, w, 1, 1, nhwc));
      out.push_back(conv(w, hw, w, 3, stride, nhwc));
      const int64_t ohw = hw / stride;
      out.push_back(conv(w, ohw, o, 1, 1, nhwc));
      if (b == 0) out.push_back(conv(in, hw, o, 1, stride, nhwc));
      in = o, hw = ohw;
    }
  }
  return out;
}

}  // namespace

int main() {
  registry().add<bench_noop_conv>("bench", DeviceType::cpu, nullptr, noop_conv);
  registry().add<bench_noop_unary>("bench", DeviceType::cpu, nullptr, noop_unary);
  const int calls = 200000, repeats = 9;
  int sink = 0;

  std::vector<ConvDesc> convs = resnet50_convs(false), cl = resnet50_convs(true);
  convs.insert(convs.end(), cl.begin(), cl.end());
  const size_t n = convs.size();
  std::printf("dispatch cost per call, ns (median of %d x %d calls, 1 thread)\n", repeats, calls);
  std::printf("  choose conv2d_fwd, %zu ResNet-50 convolutions, auto:          %8.1f\n", n,
              ns_per_call(calls, repeats, [&](int i) { sink += find_kernel<kernel_op::conv2d_fwd>(DeviceType::cpu, convs[size_t(i) % n]) != nullptr; }));
  {
    BackendGuard g("native,ref");
    std::printf("  choose conv2d_fwd, %zu ResNet-50 convolutions, native,ref:    %8.1f\n", n,
                ns_per_call(calls, repeats, [&](int i) { sink += find_kernel<kernel_op::conv2d_fwd>(DeviceType::cpu, convs[size_t(i) % n]) != nullptr; }));
  }

  void (*direct_conv)(const ConvDesc&, void*) = noop_conv;
  void (*direct_unary)(const UnaryDesc&, void*) = noop_unary;
  UnaryDesc u;
  u.op = UnaryOp::relu;
  u.loop.ndim = 1;
  u.loop.sizes[0] = 1000;
  std::printf("  choose unary (relu float32, 1000 elements), auto:            %8.1f\n",
              ns_per_call(calls, repeats, [&](int) { sink += find_kernel<kernel_op::unary>(DeviceType::cpu, u) != nullptr; }));
  const double d_conv = ns_per_call(calls, repeats, [&](int i) { direct_conv(convs[size_t(i) % n], &sink); });
  const double k_conv = ns_per_call(calls, repeats, [&](int i) { dispatch<bench_noop_conv>(DeviceType::cpu, convs[size_t(i) % n], &sink); });
  const double d_unary = ns_per_call(calls, repeats, [&](int) { direct_unary(u, &sink); });
  const double k_unary = ns_per_call(calls, repeats, [&](int) { dispatch<bench_noop_unary>(DeviceType::cpu, u, &sink); });
  std::printf("  call a no-op kernel, ConvDesc:  direct %6.1f  dispatched %6.1f  overhead %6.1f\n", d_conv, k_conv,
              k_conv - d_conv);
  std::printf("  call a no-op kernel, UnaryDesc: direct %6.1f  dispatched %6.1f  overhead %6.1f\n", d_unary, k_unary,
              k_unary - d_unary);
  const double g_conv = ns_per_call(calls, repeats, [&](int i) {
    BackendGuard g("native");
    dispatch<bench_noop_conv>(DeviceType::cpu, convs[size_t(i) % n], &sink);
  });
  std::printf("  the same with a BackendGuard(\"native\") per call:  %6.1f\n", g_conv);
  return sink == 0 ? 1 : 0;
}
