// Reference of the multi-tensor optimizer update (kernels/common/multi_tensor.h): a loop over
// the list calling the single-tensor reference (kernels/cpu/ref/optim.h) on each entry, so the
// fused kernels are checked against exactly the per-parameter formulas.
// Test: ctest --test-dir build -R emu   (tests/emu/test_optim.cpp)
#pragma once

#include "kernels/common/multi_tensor.h"
#include "kernels/cpu/ref/optim.h"

namespace kiln::ref {

// entries: host pointers to T arrays.
template <class T>
void multi_tensor_step(const MultiTensorDesc& d, const TensorListEntry* entries) {
  for (int64_t i = 0; i < d.count; ++i) {
    const TensorListEntry& e = entries[i];
    T* p = static_cast<T*>(e.param);
    const T* g = static_cast<const T*>(e.grad);
    switch (d.op) {
      case MultiTensorOp::sgd: {
        SGDStepDesc s = d.sgd;
        s.n = e.n;
        sgd_step(s, p, g, static_cast<T*>(e.state0));
        break;
      }
      case MultiTensorOp::adam: {
        AdamStepDesc s = d.adam;
        s.n = e.n;
        adam_step(s, p, g, static_cast<T*>(e.state0), static_cast<T*>(e.state1));
        break;
      }
      case MultiTensorOp::lars: {
        LarsStepDesc s = d.lars;
        s.n = e.n;
        s.local_lr = e.local_lr;
        lars_step(s, p, g, static_cast<T*>(e.state0));
        break;
      }
    }
  }
}

// out[i] = sum of squares of entry i's param (or grad), in double.
template <class T>
void multi_tensor_sum_squares(const MultiTensorDesc& d, const TensorListEntry* entries, bool of_grad, double* out) {
  for (int64_t i = 0; i < d.count; ++i) {
    VecDesc v;
    v.n = entries[i].n;
    sum_squares(v, static_cast<const T*>(of_grad ? entries[i].grad : entries[i].param), out + i);
  }
}

}  // namespace kiln::ref
