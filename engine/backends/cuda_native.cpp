// The `native` backend on CUDA devices: kiln's own CUDA kernels (kernels/cuda/native, also run by
// the emulator in CI: ctest -L emu). Every op that exists on the CPU exists here (docs/architecture.md, "Decisions");
// `auto` takes cuDNN/cuBLAS first where they say yes (engine/backends/cuda_cudnn.cpp) and these
// elsewhere (max pooling with PyTorch's indices, adaptive pooling, dropout, the losses, the
// optimizers ...). The kernels are one list, engine/backends/cuda_native_kernels.inc, which the
// oracle also compiles against the emulator (tests/oracle/emu_backend.cpp). The inner product is
// the gemm composite (engine/ops/linear_gemm.h) over kiln's GEMM under a strict "native"
// preference: it needs a real device and is registered here only.
#include "engine/dispatch.h"

#ifdef KILN_HAVE_CUDA

#include "engine/backends/cuda_native_kernels.inc"
#include "engine/ops/linear_gemm.h"

namespace kiln {

void register_cuda_native(BackendRegistrar& r) {
  add_cuda_native_kernels(r);
  r.add<kernel_op::linear_fwd>(linear_gemm_supported, linear_gemm_fwd);
  r.add<kernel_op::linear_bwd_data>(linear_gemm_supported, linear_gemm_bwd_data);
  r.add<kernel_op::linear_bwd_weights>(linear_gemm_supported, linear_gemm_bwd_weights);
}

}  // namespace kiln

#endif  // KILN_HAVE_CUDA
