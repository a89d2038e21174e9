// cuBLAS behind kiln's GemmDesc (row-major, transposes, batch strides, alpha/beta): float32 with
// float32 math by default (TF32 with KILN_ALLOW_TF32=1 or cudnn::set_allow_tf32), float16 and
// bfloat16 operands with float32 accumulation. Device pointers, launched on the current stream,
// never synchronises. Same signature as kiln::native::gemm.
//   ctest -L gpu -R cudnn (tests/gpu/test_cudnn.cpp); mapping: ctest -R cudnn_mapping
#pragma once

#include "kernels/common/gemm.h"

namespace kiln::cudnn {

bool supports_gemm(const GemmDesc& d);
void gemm(const GemmDesc& d, const void* a, const void* b, void* c);

}  // namespace kiln::cudnn
