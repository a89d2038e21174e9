// The depthwise kernel set compiled for SVE (CMake gives *_sve.cpp +sve on ARM64; the compiler
// vectorises the loops for any vector length); chosen at run time by conv_depthwise.cpp where
// kernel_paths() names it (SVE vectors of 256 bits or more). See conv_depthwise_internal.h.
//   Test: ctest --test-dir build -R test_conv_depthwise
#include "kernels/common/parallel.h"
#include "kernels/cpu/native/conv_depthwise_internal.h"

namespace kiln::native::dw_sve {
#include "kernels/cpu/native/conv_depthwise_kernels.inc"
}  // namespace kiln::native::dw_sve
