// Descriptor of the multi-tensor optimizer update: one launch updates a LIST of parameters (SGD,
// Adam/AdamW or LARS with one parameter group's hyperparameters), as PyTorch's
// multi_tensor_apply and apex's fused optimizers do, instead of a launch per parameter. The list
// is split into fixed chunks of `chunk` elements; chunk k of the whole list belongs to the entry
// whose [chunk_begin, chunk_begin + ceil(n / chunk)) holds k (plan_tensor_list fills them).
// Each element is updated by exactly the single-tensor formula of kernels/common/optim.h; the
// per-tensor sums of squares (LARS's norms, clipping) use the same list.
// Ref: kernels/cpu/ref/multi_tensor.h; CUDA: kernels/cuda/native/optim.h.
// Test: ctest --test-dir build -R emu   (tests/emu/test_optim.cpp)
#pragma once

#include <cstdint>
#include <string>

#include "kernels/common/optim.h"

namespace kiln {

// One tensor of the list. state0: momentum buffer (SGD, LARS) or exp_avg (Adam); state1:
// exp_avg_sq (Adam only). local_lr: LARS's per-tensor trust ratio (engine/optim.cpp computes
// it from the norms), ignored by SGD and Adam.
struct TensorListEntry {
  void* param = nullptr;
  const void* grad = nullptr;
  void* state0 = nullptr;
  void* state1 = nullptr;
  int64_t n = 0;
  int64_t chunk_begin = 0;  // first chunk of this entry in the list (plan_tensor_list)
  double local_lr = 1;
};

enum class MultiTensorOp : uint8_t { sgd, adam, lars };

// The hyperparameters come from the single-tensor descriptor of `op` (its n is ignored; every
// entry's own n is used). All entries share dtype.
struct MultiTensorDesc {
  MultiTensorOp op = MultiTensorOp::sgd;
  DType dtype = DType::float32;
  int64_t count = 0;          // entries in the list
  int64_t chunk = 65536;      // elements per chunk (one CUDA block's share)
  int64_t total_chunks = 0;   // what plan_tensor_list returned
  SGDStepDesc sgd;
  AdamStepDesc adam;
  LarsStepDesc lars;
  std::string str() const {
    const char* name = op == MultiTensorOp::sgd ? "sgd" : op == MultiTensorOp::adam ? "adam" : "lars";
    return std::string("multi_tensor_") + name + "(" + dtype_name(dtype) + ", tensors=" + std::to_string(count) +
           ", chunk=" + std::to_string(chunk) + ", chunks=" + std::to_string(total_chunks) + ")";
  }
};

// Fills entries[i].chunk_begin for chunks of `chunk` elements; returns the total chunk count.
inline int64_t plan_tensor_list(TensorListEntry* entries, int64_t count, int64_t chunk) {
  int64_t k = 0;
  for (int64_t i = 0; i < count; ++i) {
    entries[i].chunk_begin = k;
    k += (entries[i].n + chunk - 1) / chunk;
  }
  return k;
}

}  // namespace kiln
