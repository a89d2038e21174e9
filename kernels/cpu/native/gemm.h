// kiln's own single-precision GEMM, the engine of linear layers and of convolution (im2col and
// implicit GEMM). Row-major; see GemmDesc. BLIS-style: op(A) and op(B) are packed into aligned
// panels per cache block and a register-tiled micro-kernel runs over them; the ISA is picked at
// run time (AVX-512F, AVX2+FMA, POWER VSX, ARM NEON or SVE, else the portable Eigen path:
// kernel_paths() in cpu_features.h; float64 always takes Eigen or the reference loop). Parallel inside with OpenMP over rectangles of C; called from inside a
// parallel region it runs on the calling thread. On the register-tiled paths the bits of C depend
// only on the shapes, not on the thread count (each element of C is summed by one thread in a
// fixed k order); the Eigen path is deterministic for a given thread count.
// Environment: KILN_GEMM=avx512|avx2|vsx|neon|sve|eigen|ref|auto forces a path; KILN_GEMM_BLOCKING=kc,nc
// overrides the cache blocking (for tuning).
//   ctest --test-dir build -R test_gemm         ./build/bench/bench_gemm
#pragma once

#include <cstdint>

#include "kernels/common/gemm.h"

namespace kiln::native {

// float32, float64 (through the portable path) and bfloat16 (gemm_bf16.h: float32 sums, C
// rounded once).
bool supports_gemm(const GemmDesc& d);
void gemm(const GemmDesc& d, const void* a, const void* b, void* c);

// Plain-pointer entry for other kernels (conv): C[m x n] = alpha * op(A) op(B) + beta * C.
void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// The float32 implementations. `best` resolves to the fastest one this CPU and build have.
enum class GemmPath : uint8_t { best, avx512, avx2, vsx, neon, sve, eigen, ref };
const char* gemm_path_name(GemmPath p);
bool gemm_path_available(GemmPath p);
// The path float32 GEMMs take now (never `best`): the last set_gemm_path, else KILN_GEMM, else
// the best available. Throws kiln::Error when KILN_GEMM names an unknown or unavailable path.
GemmPath gemm_path();
// Process-wide; throws kiln::Error if `p` is not available. Not to be changed while GEMMs run.
void set_gemm_path(GemmPath p);

}  // namespace kiln::native
