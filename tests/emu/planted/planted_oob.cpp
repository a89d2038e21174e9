// Planted bug (b) for the emulator: a kernel reads one element past its device buffer. Emulated
// device memory is host heap memory and the emu build has AddressSanitizer, so the run must end
// in a heap-buffer-overflow report (CTest's PASS_REGULAR_EXPRESSION, tests/CMakeLists.txt).
// Run: ctest --test-dir build -R emu.planted_oob
#include <cstdio>
#include <vector>

#include "kernels/cuda/launch.h"

KILN_CUDA_NAMESPACE_BEGIN
namespace planted {

// Meant to shift left by one; the bound should be i + 1 < n.
KILN_GLOBAL void shift_left_oob(const float* src, float* dst, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) dst[i] = src[i + 1];
}

}  // namespace planted
KILN_CUDA_NAMESPACE_END

int main() {
  const int n = 100;
  std::vector<float> src(n, 1.0f), dst(n);
  KILN_LAUNCH(kiln::cuda::planted::shift_left_oob, kiln::cuda::dim3(4), kiln::cuda::dim3(32), 0,
              kiln::cuda::current_stream(), src.data(), dst.data(), n);
  std::printf("planted_oob: the read past the buffer went unnoticed\n");
  return 1;
}
