// ARM64 SVE single-precision GEMM path, for SVE vectors wider than NEON's: 256 bits (Neoverse V1,
// Graviton3) and 512 bits (A64FX). The packing, blocking and loop order of gemm_avx512.cpp around
// an 8 x (2 vectors) register tile: 8 x 16 at 256 bits, 8 x 32 at 512. 16 accumulators, 2 of B
// and 2 of A, each holding 4 values of A replicated in every 128-bit segment (ld1rqw) so that the
// by-element FMLA (z.s, z.s, z.s[l]) broadcasts them: 16 FMAs against 4 loads per k step. With 2
// FMA pipes (V1: 2 x 256-bit, A64FX: 2 x 512-bit) that is 8 cycles of FMA per step, and the loads
// fit beside them: about 95% of the FMA peak in the loop from the instruction mix, before
// measurement on hardware. At 128 bits (Neoverse V2, Grace) SVE is NEON's width with fewer
// registers per tile, so gemm_neon.cpp serves there (kernel_paths() in cpu_features.cpp).
// The kernel is vector-length agnostic code; a tile is chosen by the length the process runs with
// and used only at that length. Compiled with +sve (CMakeLists.txt); absent on other targets.
//   KILN_GEMM=sve ./build/bench/bench_gemm          ctest --test-dir build -R test_gemm
#include "kernels/cpu/native/gemm_internal.h"

#if defined(__aarch64__) && defined(__ARM_FEATURE_SVE)
#include <arm_sve.h>

#include "kernels/cpu/native/gemm_tile.h"

namespace kiln::native::gemm_detail {
namespace {

constexpr int kMR = 8;
constexpr int64_t kTransPanels = 16;

// SVE vectors are sizeless (no arrays of them): the 8 rows of accumulators are named, and rows at
// or past R are dropped by `if constexpr`.
#define KILN_SVE_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)

template <int I>
inline svfloat32_t a_quad(svfloat32_t a0, svfloat32_t a1) {
  if constexpr (I < 4) return a0;
  else return a1;
}

// C[R x nv] = alpha * A[R x kc] * Bpanel + beta * C (beta == 0: C is not read). nv <= NR, where
// NR is two vectors.
template <int64_t NR, int R, int Mode>
void micro_kernel(int64_t kc, const float* __restrict a, int64_t lda, const float* __restrict b, float* c, int64_t ldc,
                  int64_t nv, float alpha, float beta) {
  constexpr int64_t kHalf = NR / 2;
  const svbool_t all = svptrue_b32();
#define KILN_DECL(I) svfloat32_t c##I##0 = svdup_n_f32(0.f), c##I##1 = svdup_n_f32(0.f);
  KILN_SVE_ROWS(KILN_DECL)
#undef KILN_DECL
  int64_t steps = kc;  // kc >= 1 (see gemm_avx512.cpp on the do-while)
  do {
    const svfloat32_t b0 = svld1_f32(all, b), b1 = svld1_f32(all, b + kHalf);
    if constexpr (Mode == kPacked) {
      // A packed panel holds kMR values per k step, so both loads stay inside it for any R.
      const svfloat32_t a0 = svld1rq_f32(all, a), a1 = svld1rq_f32(all, a + 4);
#define KILN_FMA(I)                                                    \
  if constexpr (I < R) {                                               \
    c##I##0 = svmla_lane_f32(c##I##0, b0, a_quad<I>(a0, a1), I % 4); \
    c##I##1 = svmla_lane_f32(c##I##1, b1, a_quad<I>(a0, a1), I % 4); \
  }
      KILN_SVE_ROWS(KILN_FMA)
#undef KILN_FMA
      a += kMR;
    } else {
#define KILN_FMA(I)                                      \
  if constexpr (I < R) {                                 \
    const svfloat32_t av = svdup_n_f32(a[I * lda]);      \
    c##I##0 = svmla_f32_x(all, c##I##0, b0, av);         \
    c##I##1 = svmla_f32_x(all, c##I##1, b1, av);         \
  }
      KILN_SVE_ROWS(KILN_FMA)
#undef KILN_FMA
      a += 1;
    }
    b += NR;
  } while (--steps > 0);
  // Predicated stores: no access past column nv of C.
  const svbool_t p0 = svwhilelt_b32_s64(int64_t(0), nv), p1 = svwhilelt_b32_s64(kHalf, nv);
#define KILN_STORE(I)                                                \
  if constexpr (I < R) {                                             \
    float* cr = c + I * ldc;                                         \
    svfloat32_t x0 = svmul_n_f32_x(all, c##I##0, alpha);             \
    svfloat32_t x1 = svmul_n_f32_x(all, c##I##1, alpha);             \
    if (beta != 0.f) {                                               \
      x0 = svmla_n_f32_x(all, x0, svld1_f32(p0, cr), beta);          \
      x1 = svmla_n_f32_x(all, x1, svld1_f32(p1, cr + kHalf), beta);  \
    }                                                                \
    svst1_f32(p0, cr, x0);                                           \
    svst1_f32(p1, cr + kHalf, x1);                                   \
  }
  KILN_SVE_ROWS(KILN_STORE)
#undef KILN_STORE
}

#undef KILN_SVE_ROWS

template <int64_t NR>
struct Kernels {
  static constexpr KernelFn table[2][kMR + 1] = {
      {nullptr, micro_kernel<NR, 1, kPacked>, micro_kernel<NR, 2, kPacked>, micro_kernel<NR, 3, kPacked>,
       micro_kernel<NR, 4, kPacked>, micro_kernel<NR, 5, kPacked>, micro_kernel<NR, 6, kPacked>,
       micro_kernel<NR, 7, kPacked>, micro_kernel<NR, 8, kPacked>},
      {nullptr, micro_kernel<NR, 1, kRows>, micro_kernel<NR, 2, kRows>, micro_kernel<NR, 3, kRows>,
       micro_kernel<NR, 4, kRows>, micro_kernel<NR, 5, kRows>, micro_kernel<NR, 6, kRows>, micro_kernel<NR, 7, kRows>,
       micro_kernel<NR, 8, kRows>}};
};

template <int64_t NR>
void tile(const SgemmArgs& g, const Blocking& blk, int64_t m0, int64_t m1, int64_t n0, int64_t n1, float* pa,
          float* pb) {
  tile_loop<kMR, NR, kTransPanels>(g, blk, m0, m1, n0, n1, pa, pb, Kernels<NR>::table, pack_a_plain<kMR>,
                                   pack_b_plain<NR>);
}

}  // namespace

// Two vectors of floats per tile row: 16 at 256 bits, 32 at 512.
GemmPathImpl sve_path(int vector_bits) {
  if (vector_bits == 256) return make_path<kMR, 16, kTransPanels>("sve", tile<16>, 1 << 20);
  if (vector_bits == 512) return make_path<kMR, 32, kTransPanels>("sve", tile<32>, 8 << 20);
  return GemmPathImpl{};
}

}  // namespace kiln::native::gemm_detail

#else  // built without SVE: the path is absent

namespace kiln::native::gemm_detail {
GemmPathImpl sve_path(int) { return GemmPathImpl{}; }
}  // namespace kiln::native::gemm_detail

#endif
