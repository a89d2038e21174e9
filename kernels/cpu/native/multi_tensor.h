// Multi-tensor optimizer steps on the CPU (the multi_tensor_step and multi_tensor_sum_squares ops,
// engine/op_list.inc): each call updates a whole list of tensors in one parallel region.
#pragma once

#include "kernels/common/multi_tensor.h"

namespace kiln::native {

bool supports_multi_tensor(const MultiTensorDesc& d);  // float32/float64, chunk > 0
void multi_tensor_step(const MultiTensorDesc& d, const TensorListEntry* entries);
// out[i] = sum of squares of entry i's grad (of_grad) or param; each tensor's bits as sum_squares.
void multi_tensor_sum_squares(const MultiTensorDesc& d, const TensorListEntry* entries, bool of_grad, double* out);

}  // namespace kiln::native
