// Internal to the native depthwise convolution: the per-call plan the kernel set needs (tap
// ranges, transposed weights, reduction buffers, all owned by the caller) and the builds of the
// kernel set, conv_depthwise_kernels.inc compiled for the baseline ISA (dw_base, in
// conv_depthwise.cpp), for AVX-512F (dw_avx512), AVX2 (dw_avx2) and SVE (dw_sve), each in its
// conv_depthwise_<isa>.cpp and picked at run time by kernel_paths() (cpu_features.h). Outside its
// architecture an ISA build is the baseline code again, never called. The .inc uses no
// standard-library templates: an inline template instantiated in an ISA file could be the copy
// the linker keeps for the baseline one too.
#pragma once

#include <cstdint>

#include "kernels/common/conv.h"

namespace kiln::native {

struct DwPlan {
  const int64_t *p0, *p1;  // per kernel row r: output rows whose input row is inside the image
  const int64_t *q0, *q1;  // per kernel column s: the same for output columns
  const float* wt;         // NHWC: weights transposed to [R*S, K]
  float* partial;          // NHWC backward-weights: parts x [R*S + 1, K], zeroed
  int64_t parts;
  double* acc;             // NCHW backward-weights: [K, R*S]
  float* part;             // NCHW backward-weights: [K, R*S, Q]
};

#define KILN_DW_DECLARE(ns)                                                                                   \
  namespace ns {                                                                                              \
  void fwd_nchw(const ConvDesc& d, const DwPlan& pl, const float* src, const float* wei, const float* bias,   \
                float* dst);                                                                                  \
  void bwd_data_nchw(const ConvDesc& d, const DwPlan& pl, const float* diff_dst, const float* wei,            \
                     float* diff_src);                                                                        \
  void bwd_weights_nchw(const ConvDesc& d, const DwPlan& pl, const float* src, const float* diff_dst,         \
                        float* diff_wei, float* diff_bias);                                                   \
  void fwd_nhwc(const ConvDesc& d, const DwPlan& pl, const float* src, const float* bias, float* dst);        \
  void bwd_data_nhwc(const ConvDesc& d, const DwPlan& pl, const float* diff_dst, float* diff_src);            \
  void bwd_weights_nhwc(const ConvDesc& d, const DwPlan& pl, const float* src, const float* diff_dst);        \
  }
KILN_DW_DECLARE(dw_base)
KILN_DW_DECLARE(dw_avx512)
KILN_DW_DECLARE(dw_avx2)
KILN_DW_DECLARE(dw_sve)
#undef KILN_DW_DECLARE

}  // namespace kiln::native
