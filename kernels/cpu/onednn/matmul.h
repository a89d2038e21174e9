// oneDNN matmul primitive behind kiln's "gemm" op, for batched products: the GemmDesc's
// transposes and leading dims become strides of plain memory descriptors (no copies), a batch
// stride of 0 becomes a broadcast batch dim of 1, alpha an output scale, beta a sum post-op.
// One primitive runs the whole batch (oneDNN threads over it), where dnnl_sgemm (gemm.h) is
// called once per product. float32. Primitives are cached per full descriptor (dims, leading
// dims, batch strides, alpha, beta, threads).
// supports_matmul() says yes only to batched products (where it was measured at or above
// dnnl_sgemm; see matmul.cpp and the registration in engine/ops/linalg.cpp); supports_matmul_any() for every float32 desc
// oneDNN can express (tests, benchmarks).
//   Test: ctest --test-dir build -R test_onednn_matmul     Bench: build/bench/bench_backends --only matmul
#pragma once

#include "kernels/common/gemm.h"

namespace kiln::onednn {

bool supports_matmul(const GemmDesc& d);
bool supports_matmul_any(const GemmDesc& d);
void matmul(const GemmDesc& d, const void* a, const void* b, void* c);

}  // namespace kiln::onednn
