// Normalisation-family ops, differentiable: batch norm, dropout, softmax, log-softmax.
// Inputs of any strides; float32 and float64 (float16/bfloat16 compute in float32).
// Test: ctest --test-dir build -R norm
#pragma once

#include "engine/random.h"
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

// Inverted dropout: zeroes each element with probability p and scales the rest by 1/(1-p).
// The mask comes from the Philox stream of `gen` (default: the default generator), which
// advances by x.numel(); for a given generator state the mask does not depend on the thread
// count. Identity when !training or p == 0; zeros when p == 1; p outside [0, 1] throws.
Tensor dropout(const Tensor& x, double p, bool training, Generator* gen = nullptr);

// Softmax / log-softmax along `dim` (negative counts from the end), numerically stable (the
// maximum is subtracted before exp).
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

}  // namespace kiln::ops
