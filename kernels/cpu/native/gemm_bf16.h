// kiln's own bfloat16 GEMM: bfloat16 A and B, products summed in float32, C in float32 or rounded
// once to bfloat16. The engine of native bfloat16 gemm, linear and convolution.
//
// Paths (picked at run time, like the float32 GEMM's):
//  - avx512_bf16 (gemm_bf16_avx512bf16.cpp, Cooper Lake, Sapphire Rapids, Zen 4): BLIS-style
//    cache blocking around a 12 x 32 register tile of vdpbf16ps (24 zmm accumulators). op(A) and
//    op(B) are packed with k in pairs: one 32-bit word holds the two bfloat16 values of k = 2p and
//    2p + 1, which vdpbf16ps multiplies and adds into one float32 lane. An odd k pads its last
//    pair with zero.
//  - widen (any CPU): op(A) and op(B) widened to float32 (exact) and handed to the float32 GEMM
//    (gemm.h), so native takes bfloat16 everywhere.
// AMX tiles (TDPBF16PS on Sapphire Rapids) are not implemented: on a CPU with AMX the avx512_bf16
// path runs. An AMX path would be another tile function over the same pair-interleaved panels
// (AMX's B layout is the same VNNI pairing), plus the arch_prctl permission request.
//
// Numerics: every product of two bfloat16 values is exact in float32 and sums run in float32 in a
// fixed k order, so the bits of C depend only on the shapes and the path, not on the thread count.
// The two paths may differ in the last bits (vdpbf16ps adds a pair of products at a time).
// Threads: OpenMP over rectangles of C; from inside a parallel region it runs on the calling thread.
// Environment: KILN_GEMM_BF16=avx512_bf16|widen|auto forces a path (docs/environment.md).
//   ctest --test-dir build -R "kernels.test_gemm_bf16|kernels.test_conv_bf16"   ./build/bench/bench_gemm_bf16
#pragma once

#include <cstdint>

#include "kernels/common/gemm.h"
#include "kernels/common/half.h"

namespace kiln::native {

// C[m x n] (float32) = alpha * op(A) op(B) + beta * C, row-major, A and B bfloat16 (GemmDesc's
// transposes and leading dimensions). beta == 0: C is not read.
void bf16gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const BFloat16* a,
              int64_t lda, const BFloat16* b, int64_t ldb, float beta, float* c, int64_t ldc);

// What is done to each float32 result before it is rounded into a bfloat16 C.
struct Bf16Epilogue {
  const float* col_bias = nullptr;  // added to every row (length n), or null
  bool relu = false;                // then max(x, 0)
};

// C[m x n] (bfloat16) = round(alpha * op(A) op(B) + beta * C [+ bias] [relu]): the whole sum and the
// epilogue in float32, one rounding per element. Scratch of up to 4 MiB per call.
void bf16gemm_round(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const BFloat16* a,
                    int64_t lda, const BFloat16* b, int64_t ldb, float beta, BFloat16* c, int64_t ldc,
                    const Bf16Epilogue& epi = {});

// dst[i] = BFloat16(src[i]) for i < n (round to nearest even), vectorised where the AVX512_BF16
// path is built; the same bits either way. Single-threaded.
void round_to_bf16(const float* src, int64_t n, BFloat16* dst);

// GemmDesc with dtype bfloat16: A, B and C bfloat16 (C rounded once), batches as GemmDesc says.
void gemm_bf16(const GemmDesc& d, const void* a, const void* b, void* c);

enum class Bf16GemmPath : uint8_t { best, avx512_bf16, widen };
const char* bf16_gemm_path_name(Bf16GemmPath p);
bool bf16_gemm_path_available(Bf16GemmPath p);  // avx512_bf16: AVX512_BF16 and AVX-512BW here
// The path now taken (never `best`): the last set_bf16_gemm_path, else KILN_GEMM_BF16, else the
// best available. Throws kiln::Error when KILN_GEMM_BF16 names an unknown or unavailable path.
Bf16GemmPath bf16_gemm_path();
// Process-wide, for tests and comparisons; throws kiln::Error if `p` is not available. Not to be
// changed while GEMMs run.
void set_bf16_gemm_path(Bf16GemmPath p);

}  // namespace kiln::native
