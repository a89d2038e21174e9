// kiln's own CPU loss kernels: cross-entropy fused with log-softmax (one pass over the logits
// for the forward, one for the backward), NLL, BCE with logits and MSE. Reductions sum fixed
// blocks in double and add the block sums in order, so the result is the same for any thread
// count. float32 and float64. Test: ctest --test-dir build -R loss ; bench: build/bench/bench_norm
#pragma once

#include <cstdint>

#include "kernels/common/loss.h"

namespace kiln::native {

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

}  // namespace kiln::native
