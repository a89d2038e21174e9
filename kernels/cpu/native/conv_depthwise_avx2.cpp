// The depthwise kernel set compiled for AVX2 (CMake gives *_avx2.cpp the flags); chosen at run
// time by conv_depthwise.cpp where kernel_paths() names it. See conv_depthwise_internal.h.
//   Test: ctest --test-dir build -R test_conv_depthwise
#include "kernels/common/parallel.h"
#include "kernels/cpu/native/conv_depthwise_internal.h"

namespace kiln::native::dw_avx2 {
#include "kernels/cpu/native/conv_depthwise_kernels.inc"
}  // namespace kiln::native::dw_avx2
