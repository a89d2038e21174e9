// Fused optimizer updates as ops: each updates one parameter and its state tensors in place,
// outside autograd, through the dispatcher (kernels/cpu/{ref,native}/optim.*). engine/optim.h
// builds the optimizers on them. Descriptor fields dtype and n are filled in here.
// Test: ctest --test-dir build -R optim
#pragma once

#include "engine/tensor.h"
#include "kernels/common/optim.h"

namespace kiln::ops {

// param, grad and the state tensors: contiguous, same shape and floating dtype (checked, kiln::Error
// naming the op and the mismatch). momentum_buffer may be undefined when d.momentum == 0.
void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, SGDStepDesc d);
void adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
               AdamStepDesc d);
void lars_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, LarsStepDesc d);

// Sum of squares of all elements, accumulated in double (any layout; copies if not contiguous).
double sum_squares(const Tensor& x);
// x *= s in place (x contiguous, floating).
void scale_(const Tensor& x, double s);

}  // namespace kiln::ops
