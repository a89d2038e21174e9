// The depthwise kernel set compiled for AVX-512 (CMake gives *_avx512.cpp the flags); chosen at
// run time by conv_depthwise.cpp when the CPU has it. See conv_depthwise_internal.h.
//   Test: ctest --test-dir build -R test_conv_depthwise
#include "kernels/common/parallel.h"
#include "kernels/cpu/native/conv_depthwise_internal.h"

namespace kiln::native::dw_avx512 {
#include "kernels/cpu/native/conv_depthwise_kernels.inc"
}  // namespace kiln::native::dw_avx512
