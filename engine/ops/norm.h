// Normalisation ops, differentiable: batch norm (with a fused ReLU), local response norm.
// Softmax and dropout have their own headers (engine/ops/softmax.h, engine/ops/dropout.h).
// Inputs of any strides; float32 and float64 (float16/bfloat16 compute in float32).
// Test: ctest --test-dir build -R norm
#pragma once

#include "engine/tensor.h"

namespace kiln::ops {

// Batch normalisation of x [N, C, ...] over every dim but 1, like torch.nn.functional.batch_norm.
// weight, bias: [C] or undefined (scale 1, shift 0). running_mean, running_var: [C] buffers or
// undefined; in training they are updated IN PLACE: r = (1 - momentum) * r + momentum * batch
// stat, with the unbiased batch variance for running_var. training: normalise with the batch
// mean and biased variance (needs more than one value per channel); eval: with the running
// stats (which must then be given). Differentiable w.r.t. x, weight and bias in both modes.
Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                  const Tensor& running_var, bool training, double momentum = 0.1, double eps = 1e-5);
// relu(batch_norm(...)) with the ReLU applied in the normalisation's output pass (no separate
// tensor or pass); backward masks the gradient by the output > 0.
Tensor batch_norm_relu(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                       const Tensor& running_var, bool training, double momentum = 0.1, double eps = 1e-5);

// Across channels (dim 1) of an input with >= 3 dims:
//   y = x / (k + alpha / size * sum over channels [c - size/2, c + (size-1)/2] of x^2)^beta.
Tensor local_response_norm(const Tensor& x, int64_t size, double alpha = 1e-4, double beta = 0.75, double k = 1.0);

}  // namespace kiln::ops
