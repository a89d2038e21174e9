// ARM64 NEON single-precision GEMM path: the packing, blocking and loop order of gemm_avx512.cpp
// around an 8 x 12 register tile sized to the 32 128-bit registers: 24 accumulators, 3 of B and
// 2 holding 8 values of A, whose lanes the by-element FMLA (v.4s, v.4s, v.s[l]) broadcasts for
// free. Per k step: 24 FMAs against 5 loads (ldr q), so a core with 2 (Neoverse N1, Ampere) or 4
// (Neoverse V1/V2, Grace) 128-bit FMA pipes stays FMA-bound: about 95% of the FMA peak in the
// loop from the instruction mix, 85-90% with packing, before measurement on hardware.
// AArch64 always has NEON: this file needs no flags, and is an absent path on other targets.
//   KILN_GEMM=neon ./build/bench/bench_gemm          ctest --test-dir build -R test_gemm
#include "kernels/cpu/native/gemm_internal.h"

#if defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>

#include "kernels/cpu/native/gemm_tile.h"

namespace kiln::native::gemm_detail {
namespace {

constexpr int kMR = 8;
constexpr int kNR = 12;
constexpr int64_t kTransPanels = 16;

// acc[I][*] += B row * A value I, for I in [I, R): the lane index must be a constant.
template <int R, int I = 0>
inline void fma_rows(float32x4_t (&acc)[R][3], float32x4_t a0, float32x4_t a1, float32x4_t b0, float32x4_t b1,
                     float32x4_t b2) {
  if constexpr (I < R) {
    const float32x4_t av = I < 4 ? a0 : a1;
    acc[I][0] = vfmaq_laneq_f32(acc[I][0], b0, av, I % 4);
    acc[I][1] = vfmaq_laneq_f32(acc[I][1], b1, av, I % 4);
    acc[I][2] = vfmaq_laneq_f32(acc[I][2], b2, av, I % 4);
    fma_rows<R, I + 1>(acc, a0, a1, b0, b1, b2);
  }
}

// C[R x nv] = alpha * A[R x kc] * Bpanel + beta * C (beta == 0: C is not read). nv <= kNR.
template <int R, int Mode>
void micro_kernel(int64_t kc, const float* __restrict a, int64_t lda, const float* __restrict b, float* c, int64_t ldc,
                  int64_t nv, float alpha, float beta) {
  float32x4_t acc[R][3];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = acc[r][2] = vdupq_n_f32(0.f);
  int64_t steps = kc;  // kc >= 1 (see gemm_avx512.cpp on the do-while)
  do {
    const float32x4_t b0 = vld1q_f32(b), b1 = vld1q_f32(b + 4), b2 = vld1q_f32(b + 8);
    if constexpr (Mode == kPacked) {
      // A packed panel holds kMR values per k step, so both loads stay inside it for any R.
      fma_rows<R>(acc, vld1q_f32(a), vld1q_f32(a + 4), b0, b1, b2);
      a += kMR;
    } else {
      for (int r = 0; r < R; ++r) {
        const float32x4_t av = vld1q_dup_f32(a + r * lda);
        acc[r][0] = vfmaq_f32(acc[r][0], b0, av);
        acc[r][1] = vfmaq_f32(acc[r][1], b1, av);
        acc[r][2] = vfmaq_f32(acc[r][2], b2, av);
      }
      a += 1;
    }
    b += kNR;
  } while (--steps > 0);
  const float32x4_t va = vdupq_n_f32(alpha);
  for (int r = 0; r < R; ++r) {
    float* cr = c + r * ldc;
    float32x4_t x[3] = {vmulq_f32(acc[r][0], va), vmulq_f32(acc[r][1], va), vmulq_f32(acc[r][2], va)};
    if (nv == kNR) {
      for (int j = 0; j < 3; ++j) {
        if (beta != 0.f) x[j] = vfmaq_n_f32(x[j], vld1q_f32(cr + 4 * j), beta);
        vst1q_f32(cr + 4 * j, x[j]);
      }
    } else {  // an edge panel: no access past column nv of C
      float t[kNR];
      for (int j = 0; j < 3; ++j) vst1q_f32(t + 4 * j, x[j]);
      for (int64_t j = 0; j < nv; ++j) cr[j] = beta != 0.f ? t[j] + beta * cr[j] : t[j];
    }
  }
}

#define KILN_KERNELS(mode)                                                                               \
  {                                                                                                      \
    nullptr, micro_kernel<1, mode>, micro_kernel<2, mode>, micro_kernel<3, mode>, micro_kernel<4, mode>, \
        micro_kernel<5, mode>, micro_kernel<6, mode>, micro_kernel<7, mode>, micro_kernel<8, mode>       \
  }
constexpr KernelFn kKernels[2][kMR + 1] = {KILN_KERNELS(kPacked), KILN_KERNELS(kRows)};
#undef KILN_KERNELS

void tile(const SgemmArgs& g, const Blocking& blk, int64_t m0, int64_t m1, int64_t n0, int64_t n1, float* pa,
          float* pb) {
  tile_loop<kMR, kNR, kTransPanels>(g, blk, m0, m1, n0, n1, pa, pb, kKernels, pack_a_plain<kMR>, pack_b_plain<kNR>);
}

}  // namespace

GemmPathImpl neon_path() { return make_path<kMR, kNR, kTransPanels>("neon", tile, 1 << 20); }

}  // namespace kiln::native::gemm_detail

#else  // not AArch64: the path is absent

namespace kiln::native::gemm_detail {
GemmPathImpl neon_path() { return GemmPathImpl{}; }
}  // namespace kiln::native::gemm_detail

#endif
