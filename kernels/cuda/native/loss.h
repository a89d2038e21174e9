// kiln's own CUDA loss kernels: cross-entropy fused with log-softmax (log-sum-exp saved for the
// backward), NLL, BCE with logits and MSE, with ignore_index, label smoothing and the three
// reductions. Reduced losses are summed in double by ONE block with a fixed tree (deterministic,
// no atomics). float32 and float64; same descriptors and signatures as kernels/cpu/native/loss.h,
// DEVICE pointers, launched on current_stream().
// Test (emulated): ctest --test-dir build -R emu   (tests/emu/test_loss.cpp)
#pragma once

#include <cstdint>

#include "kernels/common/loss.h"
#include "kernels/cuda/namespace.h"

KILN_CUDA_NAMESPACE_BEGIN

bool supports_class_loss(const ClassLossDesc& d);
void cross_entropy_fwd(const ClassLossDesc& d, const void* src, const int64_t* target, void* dst, void* save_lse);
void cross_entropy_bwd(const ClassLossDesc& d, const void* src, const int64_t* target, const void* save_lse,
                       const void* diff_dst, void* diff_src);
void nll_fwd(const ClassLossDesc& d, const void* src, const int64_t* target, void* dst);
void nll_bwd(const ClassLossDesc& d, const int64_t* target, const void* diff_dst, void* diff_src);

bool supports_point_loss(const PointLossDesc& d);
void point_loss_fwd(const PointLossDesc& d, const void* src, const void* target, const void* pos_weight, void* dst);
void point_loss_bwd(const PointLossDesc& d, const void* src, const void* target, const void* pos_weight,
                    const void* diff_dst, void* diff_src, void* diff_target);

KILN_CUDA_NAMESPACE_END
