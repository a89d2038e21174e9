// kiln's own CPU optimizer kernels: one fused pass per parameter (read p, g and the state once,
// write them once), split across threads in contiguous chunks, with branch-free inner loops the
// compiler vectorises. Elementwise, so the result is the same for any thread count; sum of
// squares adds fixed blocks in double, in order. float32 and float64.
// Test: ctest --test-dir build -R optim
#pragma once

#include "kernels/common/optim.h"

namespace kiln::native {

bool supports_optim_sgd(const SGDStepDesc& d);
bool supports_optim_adam(const AdamStepDesc& d);
bool supports_optim_lars(const LarsStepDesc& d);
bool supports_optim_vec(const VecDesc& d);
void sgd_step(const SGDStepDesc& d, void* param, const void* grad, void* momentum_buffer);
void adam_step(const AdamStepDesc& d, void* param, const void* grad, void* exp_avg, void* exp_avg_sq);
void lars_step(const LarsStepDesc& d, void* param, const void* grad, void* momentum_buffer);
void sum_squares(const VecDesc& d, const void* x, double* out);
void scale(const VecDesc& d, void* x);

}  // namespace kiln::native
