// Loss functions with PyTorch's semantics, differentiable: cross-entropy (fused log-softmax +
// NLL, label smoothing, ignore_index), NLL, BCE with logits (pos_weight) and MSE.
// Reduction::none returns per-element losses shaped like the target; mean/sum a 0-d tensor.
// Test: ctest --test-dir build -R loss
#pragma once

#include "engine/tensor.h"
#include "kernels/common/loss.h"  // enum class Reduction { none, mean, sum }

namespace kiln::ops {

// input: logits [N, C] or [N, C, d1, ...] (or [C] with a 0-d target); target: int64 class
// indices [N] or [N, d1, ...] in [0, C) or equal to ignore_index (those contribute 0 and are
// left out of the mean's denominator). With label smoothing eps the loss per element is
// (1 - eps) * nll + eps / C * sum_c(-log_softmax[c]). Gradient w.r.t. input only.
Tensor cross_entropy(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean,
                     double label_smoothing = 0.0, int64_t ignore_index = -100);

// input: log-probabilities shaped as for cross_entropy; loss = -input[n, target[n], ...].
Tensor nll_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean,
                int64_t ignore_index = -100);

// loss = max(x, 0) - x * t + log(1 + exp(-|x|)), with pos_weight (broadcastable to input, e.g.
// [C] for input [N, C]) weighting the positive term: (1 - t) x + (1 + (pw - 1) t) softplus(-x).
// target: same shape and dtype as input. Gradients w.r.t. input and target (not pos_weight).
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        Reduction reduction = Reduction::mean, const Tensor& pos_weight = Tensor());

// (input - target)^2, same shapes. Gradients w.r.t. input and target.
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean);

}  // namespace kiln::ops
