// cuBLAS GEMM (see gemm.h): kiln's row-major problem is cuBLAS's column-major one with the
// operands swapped (mapping.cpp, to_column_major). One call, cublasGemmStridedBatchedEx (or
// cublasGemmEx for a single product), so every dtype goes through the same path and the compute
// type states the precision: CUBLAS_COMPUTE_32F (true float32) or CUBLAS_COMPUTE_32F_FAST_TF32.
// Built with CUDA (the kernels/cuda host rule); compiled empty where cuDNN was not found.
#if defined(KILN_HAVE_CUDNN)

#include "kernels/cuda/cudnn/gemm.h"

#include "kernels/cuda/cudnn/handles.h"
#include "kernels/cuda/cudnn/mapping.h"

namespace kiln::cudnn {

bool supports_gemm(const GemmDesc& d) { return gemm_unsupported(d) == nullptr && device_supports(d.dtype); }

void gemm(const GemmDesc& d, const void* a, const void* b, void* c) {
  const char* why = gemm_unsupported(d);
  KILN_CHECK(!why, "cudnn gemm: ", why, " (", d.str(), ")");
  if (d.m == 0 || d.n == 0 || d.batch == 0) return;
  Context& ctx = context();
  const BlasGemm g = to_column_major(d);
  const cudaDataType_t t = blas_data_type(d.dtype);
  // Half types accumulate in float32; so does float32 (TF32 only when allowed).
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  if (d.dtype == DType::float32 && allow_tf32()) compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  const float alpha = float(d.alpha), beta = float(d.beta);
  const cublasOperation_t ta = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  // cuBLAS's first operand is kiln's B, its second kiln's A.
  const void* first = b;
  const void* second = a;
  if (g.batch == 1) {
    KILN_CUBLAS_CHECK(cublasGemmEx(ctx.blas, ta, tb, int(g.m), int(g.n), int(g.k), &alpha, first, t, int(g.lda), second,
                                   t, int(g.ldb), &beta, c, t, int(g.ldc), compute, CUBLAS_GEMM_DEFAULT),
                      "gemm ", d.str());
  } else {
    KILN_CUBLAS_CHECK(cublasGemmStridedBatchedEx(ctx.blas, ta, tb, int(g.m), int(g.n), int(g.k), &alpha, first, t,
                                                 int(g.lda), (long long)g.stride_a, second, t, int(g.ldb),
                                                 (long long)g.stride_b, &beta, c, t, int(g.ldc),
                                                 (long long)g.stride_c, int(g.batch), compute, CUBLAS_GEMM_DEFAULT),
                      "gemm ", d.str());
  }
}

}  // namespace kiln::cudnn

#endif  // KILN_HAVE_CUDNN
