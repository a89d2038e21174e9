// Descriptors of the loss family: class-index losses (cross-entropy fused with log-softmax, NLL)
// and elementwise losses (BCE with logits, MSE), each with a reduction. Kernels read contiguous
// arrays that engine/ops/loss.cpp prepares. Test: ctest --test-dir build -R loss
#pragma once

#include <cstdint>
#include <string>

#include "kernels/common/dtype.h"

namespace kiln {

// How per-element losses become the output: kept ([N, d1, ...]), averaged, or summed.
// For class-index losses `mean` divides by the number of targets that are not ignore_index
// (0/0 = NaN when all are ignored, as in PyTorch).
enum class Reduction : uint8_t { none, mean, sum };
const char* reduction_name(Reduction r);

// Class-index losses over src [N, C, S] (S = product of the dims after C, 1 for [N, C]) and an
// int64 target [N, S] with values in [0, C) or ignore_index (validated by the op wrapper).
//  cross_entropy fwd (src = logits, target -> dst, save_lse): loss_i = -(1 - eps) logp[t_i]
//    - eps / C * sum_c logp[c], logp = src - lse, lse = log-sum-exp over C (saved, [N*S]);
//    0 for ignored targets. dst: [N*S] for Reduction::none, else one value.
//  cross_entropy bwd (src, target, save_lse, diff_dst -> diff_src):
//    diff_src[c] = g_i * (softmax[c] - (1 - eps) [c == t_i] - eps / C), 0 for ignored targets.
//  nll fwd (src = log-probs, target -> dst): loss_i = -src[t_i]; bwd (target, diff_dst ->
//    diff_src): -g_i at t_i, 0 elsewhere.
// g_i = diff_dst[i] (none), diff_dst[0] (sum), diff_dst[0] / count (mean).
struct ClassLossDesc {
  DType dtype = DType::float32;
  int64_t N = 1, C = 1, S = 1;
  Reduction reduction = Reduction::mean;
  double label_smoothing = 0;
  int64_t ignore_index = -100;
  std::string str() const;
};

// Elementwise losses over n contiguous elements of src and target (same dtype):
//  bce_logits: loss = (1 - t) x + lw (log1p(exp(-|x|)) + max(-x, 0)), lw = 1 + (pw - 1) t
//    with pw = pos_weight[i] (already broadcast to n elements) or 1 without one;
//    = max(x, 0) - x t + log1p(exp(-|x|)) when pw = 1.
//  mse: loss = (x - t)^2.
// fwd (src, target, pos_weight -> dst); bwd (src, target, pos_weight, diff_dst -> diff_src,
// diff_target), pos_weight and both outputs nullable.
enum class PointLoss : uint8_t { bce_logits, mse };
struct PointLossDesc {
  PointLoss kind = PointLoss::mse;
  DType dtype = DType::float32;
  int64_t n = 0;
  Reduction reduction = Reduction::mean;
  std::string str() const;
};

}  // namespace kiln
