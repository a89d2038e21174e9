// Private to kernels/cpu/native/gemm*.cpp: the pieces every single-precision GEMM path provides
// to the common driver in gemm.cpp (threading, batching, buffers). Each ISA file fills a GemmPathImpl
// with its register tile (mr x nr), cache blocking (mc, kc, nc) and a single-threaded `tile`
// function that computes one rectangle of C. Kept free of templates and std:: containers so the
// ISA files (compiled with -mavx512f, -mavx2, +sve) share no inline code with the rest of the build.
//   ctest --test-dir build -R test_gemm         ./build/bench/bench_gemm
#pragma once

#include <cstdint>

namespace kiln::native {
long l2_cache_bytes();  // cpu_features.h (declared here to keep <string> out of the ISA files)
}  // namespace kiln::native

namespace kiln::native::gemm_detail {

// C[m x n] = alpha * op(A) op(B) + beta * C, row-major (see GemmDesc). k >= 1, alpha != 0.
struct SgemmArgs {
  bool trans_a, trans_b;
  int64_t m, n, k;
  float alpha;
  const float* a;
  int64_t lda;
  const float* b;
  int64_t ldb;
  float beta;
  float* c;
  int64_t ldc;
};

struct Blocking {
  int64_t mr, nr;      // register tile; thread rectangles start on multiples of these
  int64_t mc, kc, nc;  // cache blocks: A is packed mc x kc at a time, B kc x nc
  // When C has at most direct_max_n columns (all of C, not one thread's part, so that the k
  // blocking and hence the bits do not depend on the thread count) A is read unpacked and k is
  // blocked by kc_direct.
  int64_t direct_max_n = 0, kc_direct = 0;
};

// Computes rows [m0, m1) and columns [n0, n1) of C on the calling thread. pack_a holds at least
// mc * kc floats and pack_b kc' * round_up(min(nc, n1 - n0), nr) floats with kc' = kc_direct in
// direct mode (else kc), both 64-byte aligned.
using TileFn = void (*)(const SgemmArgs& g, const Blocking& blk, int64_t m0, int64_t m1, int64_t n0, int64_t n1,
                        float* pack_a, float* pack_b);

struct GemmPathImpl {
  const char* name = nullptr;  // null: not compiled into this build
  Blocking blk{};
  TileFn tile = nullptr;
  bool gemv = false;  // send m == 1 or n == 1 to gemm.cpp's unpacked matrix-vector loops
};

GemmPathImpl avx512_path();  // gemm_avx512.cpp
GemmPathImpl avx2_path();    // gemm_avx2.cpp
GemmPathImpl vsx_path();     // gemm_vsx.cpp (POWER8 and later)
GemmPathImpl neon_path();    // gemm_neon.cpp (ARM64)
GemmPathImpl sve_path(int vector_bits);  // gemm_sve.cpp: absent unless a tile fits that length
GemmPathImpl eigen_path();   // gemm_eigen.cpp (ignores the pack buffers)

// Eigen in double for the float64 native path; false when Eigen is not in the build.
bool eigen_dgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                 int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

}  // namespace kiln::native::gemm_detail
