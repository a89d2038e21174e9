// Private to kernels/cpu/native/gemm_bf16*.cpp: what an ISA path of the bfloat16 GEMM gives the
// driver in gemm_bf16.cpp (threads, buffers, the bfloat16 C epilogue, the widening fallback). Like
// gemm_internal.h, free of templates and std:: containers so the ISA file shares no inline code
// with the rest of the build. bfloat16 values travel as their raw 16 bits.
//   ctest --test-dir build -R kernels.test_gemm_bf16
#pragma once

#include <cstdint>

namespace kiln::native::gemm_bf16_detail {

// C[m x n] (float32) = alpha * op(A) op(B) + beta * C, row-major; k >= 1, alpha != 0.
struct Bf16Args {
  bool trans_a, trans_b;
  int64_t m, n, k;
  float alpha;
  const uint16_t* a;
  int64_t lda;
  const uint16_t* b;
  int64_t ldb;
  float beta;
  float* c;
  int64_t ldc;
};

struct Bf16Blocking {
  int64_t mr, nr;      // register tile; thread rectangles start on multiples of these
  int64_t mc, kc, nc;  // A packed mc x kc at a time, B kc x nc; kc even (k pairs never straddle blocks)
  // When C has at most direct_max_n columns (all of C: the k blocking, hence the bits, must not
  // depend on the thread split), an untransposed A is read in place with k blocks of kc_direct
  // (even): packing it would cost about as much as the few column panels it feeds.
  int64_t direct_max_n, kc_direct;
};

// Rows [m0, m1) and columns [n0, n1) of C on the calling thread. pack_a holds mc * kc / 2 32-bit
// words, pack_b round_up(min(nc, n1 - n0), nr) * kc' / 2 with kc' = kc_direct in direct mode
// (else kc), both 64-byte aligned.
using Bf16TileFn = void (*)(const Bf16Args& g, const Bf16Blocking& blk, int64_t m0, int64_t m1, int64_t n0,
                            int64_t n1, uint32_t* pack_a, uint32_t* pack_b);

// One row of the bfloat16-C epilogue: out[j] = round(t[j] + beta * out[j] + bias[j]), then
// max(., 0) if relu, for j < n (beta == 0: out is not read; bias may be null). Rounds to nearest
// even, NaN to a quiet NaN, exactly as BFloat16(float) does: the same bits as the scalar loop.
using Bf16RoundRowFn = void (*)(const float* t, int64_t n, float beta, const float* bias, bool relu, uint16_t* out);

struct Bf16PathImpl {
  const char* name = nullptr;  // null: not compiled into this build
  Bf16Blocking blk{};
  Bf16TileFn tile = nullptr;
  Bf16RoundRowFn round_row = nullptr;  // null: gemm_bf16.cpp's scalar loop
};

Bf16PathImpl avx512_bf16_path(long l2_bytes);  // gemm_bf16_avx512bf16.cpp

}  // namespace kiln::native::gemm_bf16_detail
