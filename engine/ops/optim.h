// Fused optimizer updates as ops: each updates one parameter and its state tensors in place,
// outside autograd, through the dispatcher (kernels/cpu/{ref,native}/optim.*). engine/optim.h
// builds the optimizers on them. Descriptor fields dtype and n are filled in here. The multi-tensor
// forms update (or measure) a whole LIST of same-device, same-dtype parameters in one dispatched
// call: one kernel launch on CUDA (kernels/cuda/native/optim.h), a loop over the single-tensor
// kernels on the CPU (so the CPU results are bit-identical to the per-tensor ops).
// Test: ctest --test-dir build -R "optim|multi_tensor"
#pragma once

#include <cstdint>
#include <vector>

#include "engine/tensor.h"
#include "kernels/common/multi_tensor.h"
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

// One parameter of a multi-tensor update. state0: momentum buffer (SGD, LARS; undefined for SGD
// without momentum) or exp_avg (Adam); state1: exp_avg_sq (Adam only). local_lr: LARS's trust
// ratio for this tensor (ignored by SGD and Adam).
struct MultiTensorItem {
  Tensor param, grad, state0, state1;
  double local_lr = 1;
};

// Whether optim_multi_tensor has a candidate for (device, dtype) under the current backend
// preference; where not, callers loop over the single-tensor ops instead.
bool has_multi_tensor(Device device, DType dtype);
// Updates every item with d.op's formula and d's hyperparameters (d.sgd / d.adam / d.lars; their
// n is ignored). The items must all be on one device with one floating dtype, each checked as the
// single-tensor op checks it (kiln::Error naming the op, the item and the mismatch). Fills
// d.dtype, d.count, d.total_chunks (d.chunk is kept). On CUDA the planned entry list is copied to
// the device (asynchronously, through pinned memory) and the whole list is one launch; nothing
// waits for the device.
void multi_tensor_step(const std::vector<MultiTensorItem>& items, MultiTensorDesc d);
// Sum of squares of each tensor, in double (as sum_squares, but one dispatched call per
// (device, dtype) group: two launches and one read-back on CUDA). Any layout and dtype (copies
// where not contiguous floating, as sum_squares does). out[i] belongs to xs[i].
std::vector<double> multi_sum_squares(const std::vector<Tensor>& xs);

// Parameter-update calls dispatched so far by this process (sgd_step, adam_step, lars_step and
// multi_tensor_step each count one): a test's way to see that a group was one call.
int64_t optim_update_calls();

}  // namespace kiln::ops
