// oneDNN single-precision GEMM (dnnl_sgemm, row-major, its JIT kernels) behind kiln's "gemm" op:
// same GemmDesc semantics as kernels/cpu/native/gemm.h (transposes, leading dimensions,
// alpha/beta with beta == 0 not reading C, batches at fixed strides). float32 only.
// Batches of small products run one product per thread (dnnl_sgemm is single-threaded inside a
// parallel region); large ones one after another, each on the whole team.
//   Test: ctest --test-dir build -R test_onednn     Bench: build/bench/bench_backends
#pragma once

#include "kernels/common/gemm.h"

namespace kiln::onednn {

bool supports_gemm(const GemmDesc& d);
void gemm(const GemmDesc& d, const void* a, const void* b, void* c);

}  // namespace kiln::onednn
