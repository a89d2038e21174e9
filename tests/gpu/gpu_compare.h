// Helpers shared by the gpu op, net and training tests (header only: every tests/gpu/*.cpp
// becomes a CTest entry of its own, so no helper .cpp lives here).
//  - kGpu: cuda:0; kGpuBackends: the two GPU backends every check runs under, each with the
//    strictness the issue asks for ("cudnn" falling back to kiln's kernels where cuDNN says no;
//    "native" = kiln's own CUDA kernels only);
//    (-DKILN_GPUTEST_ON_CPU: both "GPU" runs on the CPU, to check the harness itself without a GPU;
//    on the emulated device, KILN_EMU_DEVICE, "native" alone);
//  - to_host(t): t moved back to the CPU (every value a test reads goes through it);
//  - rel_diff(a, b): ||a - b|| / ||b|| over all elements, both read on the host.
//   ctest --test-dir build -L gpu --output-on-failure
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/tensor.h"

namespace kiln::gputest {

struct GpuBackend {
  const char* name;
  bool strict;
};
#if defined(KILN_EMU_DEVICE)
// The emulated device (preset emu-device) has kiln's own kernels only: "cudnn" would be "native".
inline const Device kGpu("cuda:0");
inline const GpuBackend kGpuBackends[] = {{"native", true}};
#elif !defined(KILN_GPUTEST_ON_CPU)
inline const Device kGpu("cuda:0");
inline const GpuBackend kGpuBackends[] = {{"cudnn", false}, {"native", true}};
#else
// A self-check of the test harness on a machine without a GPU: the "GPU" side runs on the CPU
// (compile these files with -DKILN_GPUTEST_ON_CPU and a plain doctest main; not built by CMake).
inline const Device kGpu{};
inline const GpuBackend kGpuBackends[] = {{"native", false}, {"auto", false}};
#endif

inline Tensor to_host(const Tensor& t) { return t.defined() ? t.detach().to(Device()) : t; }

// Relative L2 distance of `got` from `want` (both moved to the host first); 0 when both are zero,
// infinite on a shape mismatch or a NaN.
inline double rel_diff(const Tensor& got, const Tensor& want) {
  if (!got.defined() || !want.defined()) return got.defined() == want.defined() ? 0.0 : INFINITY;
  if (got.sizes() != want.sizes()) return INFINITY;
  std::vector<double> a = to_host(got).to_vector(), b = to_host(want).to_vector();
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  if (std::isnan(num)) return INFINITY;
  if (den == 0) return num == 0 ? 0.0 : INFINITY;
  return std::sqrt(num / den);
}

}  // namespace kiln::gputest
