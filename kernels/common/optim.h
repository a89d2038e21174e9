// Descriptors of the optimizer family: fused in-place parameter updates (SGD, Adam/AdamW, LARS)
// over n contiguous elements, and the two helpers gradient clipping and LARS need (sum of squares
// in double, in-place scaling). Scalars are given in double and rounded to the element type once
// per kernel, as torch.optim's tensor ops round their Python-float arguments.
// Test: ctest --test-dir build -R optim
#pragma once

#include <cstdint>
#include <string>

#include "kernels/common/dtype.h"

namespace kiln {

// torch.optim.SGD (1.13) for one parameter:
//   d = g + wd p;  momentum: b = d on the first step, else b = m b + (1 - dampening) d;
//   d = nesterov ? d + m b : b;  p -= lr d.
// Kernel args: (param, grad, momentum_buffer); the buffer is nullable when momentum == 0.
struct SGDStepDesc {
  DType dtype = DType::float32;
  int64_t n = 0;
  double lr = 0.01, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false;
  bool first = false;  // the buffer is initialised from d (its old contents are ignored)
  std::string str() const;
};

// torch.optim.Adam / AdamW (1.13) for one parameter at 1-based step t:
//   adamw: p *= 1 - lr wd;  adam: g += wd p;
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g g;
//   p += (-lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps)   (bias corrections in double).
// Kernel args: (param, grad, exp_avg, exp_avg_sq).
struct AdamStepDesc {
  DType dtype = DType::float32;
  int64_t n = 0;
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool decoupled = false;  // AdamW
  int64_t step = 1;
  std::string str() const;
};

// LARS (You et al. 2017, Algorithm 1) for one parameter, with the local rate already computed
// from the norms (engine/optim.cpp): v = m v + lr local_lr (g + wd p);  p -= v.
// Kernel args: (param, grad, momentum_buffer).
struct LarsStepDesc {
  DType dtype = DType::float32;
  int64_t n = 0;
  double lr = 0.1, local_lr = 1, momentum = 0.9, weight_decay = 0;
  std::string str() const;
};

// sum of x^2 over n elements, accumulated in double (kernel args: x, double* out);
// and x *= scale in place (kernel args: x).
struct VecDesc {
  DType dtype = DType::float32;
  int64_t n = 0;
  double scale = 1;
  std::string str() const;
};

}  // namespace kiln
