// The inner product as a composite of the gemm op, for devices whose backends have no inner
// product kernel of their own (CUDA: cuBLAS or kiln's GEMM, whichever the gemm dispatch picks
// under the same preference). The bias is a rank-1 product against a ones vector kept per
// device and dtype. float16/bfloat16 run where a gemm candidate takes the half type (cuBLAS's
// cublasGemmEx with float32 accumulation); the bias is in the data type (LinearDesc's contract)
// and is added by a second product with beta = 1, so dst rounds to half once per product.
// Registered by the CUDA backend units (engine/backends/cuda_*.cpp) under their own names.
//   Test: ctest --test-dir build -L gpu (and -L emu)
#pragma once

#include "kernels/common/linear.h"

namespace kiln {

// Whether every product the three passes make has a gemm candidate on the current CUDA device.
bool linear_gemm_supported(const LinearDesc& d);
void linear_gemm_fwd(const LinearDesc& d, const void* src, const void* wei, const void* bias, void* dst);
void linear_gemm_bwd_data(const LinearDesc& d, const void* diff_dst, const void* wei, void* diff_src);
void linear_gemm_bwd_weights(const LinearDesc& d, const void* src, const void* diff_dst, void* diff_wei,
                             void* diff_bias);

}  // namespace kiln
