// POWER VSX single-precision GEMM path (POWER8 and later): the packing, blocking and loop order of
// gemm_avx512.cpp around an 8 x 16 register tile sized to VSX's 64 vector registers: 32
// accumulators, 4 of B, 2 holding 8 values of A and 8 splats of them. Per k step: 32 FMAs
// (xvmaddasp, 4 floats each) against 6 loads and 8 splats (xxspltw, on the permute pipe). POWER8
// issues 2 VSX FMAs per cycle per core (2 x 4-wide: 16 flops), so a k step takes 16 cycles of
// FMA, and the loads (2 load-store units) and splats fit beside them: about 95% of the FMA peak
// in the loop from the instruction mix, 85-90% with packing, before measurement on hardware.
// oneDNN has no fast fp32 path on POWER, so this is the fast path there. Debian's ppc64el
// baseline is POWER8: this file needs no flags, and is an absent path on other targets.
//   KILN_GEMM=vsx ./build/bench/bench_gemm          ctest --test-dir build -R test_gemm
#include "kernels/cpu/native/gemm_internal.h"

#if defined(__powerpc64__) && defined(__VSX__)
#include <altivec.h>
// altivec.h defines these as context-sensitive keywords; kiln spells the types __vector.
#undef vector
#undef pixel
#undef bool

#include "kernels/cpu/native/gemm_tile.h"

namespace kiln::native::gemm_detail {
namespace {

using vf = __vector float;

constexpr int kMR = 8;
constexpr int kNR = 16;
constexpr int64_t kTransPanels = 16;

inline vf load(const float* p) { return vec_xl(0, p); }
inline void store(float* p, vf v) { vec_xst(v, 0, p); }

// acc[I][*] += B row * A value I, for I in [I, R): the splat index must be a constant.
template <int R, int I = 0>
inline void fma_rows(vf (&acc)[R][4], vf a0, vf a1, const vf (&b)[4]) {
  if constexpr (I < R) {
    const vf av = vec_splat(I < 4 ? a0 : a1, I % 4);
    for (int j = 0; j < 4; ++j) acc[I][j] = vec_madd(av, b[j], acc[I][j]);
    fma_rows<R, I + 1>(acc, a0, a1, b);
  }
}

// C[R x nv] = alpha * A[R x kc] * Bpanel + beta * C (beta == 0: C is not read). nv <= kNR.
template <int R, int Mode>
void micro_kernel(int64_t kc, const float* __restrict a, int64_t lda, const float* __restrict b, float* c, int64_t ldc,
                  int64_t nv, float alpha, float beta) {
  vf acc[R][4];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < 4; ++j) acc[r][j] = vec_splats(0.f);
  int64_t steps = kc;  // kc >= 1 (see gemm_avx512.cpp on the do-while)
  do {
    const vf bv[4] = {load(b), load(b + 4), load(b + 8), load(b + 12)};
    if constexpr (Mode == kPacked) {
      // A packed panel holds kMR values per k step, so both loads stay inside it for any R.
      fma_rows<R>(acc, load(a), load(a + 4), bv);
      a += kMR;
    } else {
      for (int r = 0; r < R; ++r) {
        const vf av = vec_splats(a[r * lda]);
        for (int j = 0; j < 4; ++j) acc[r][j] = vec_madd(av, bv[j], acc[r][j]);
      }
      a += 1;
    }
    b += kNR;
  } while (--steps > 0);
  const vf va = vec_splats(alpha), vb = vec_splats(beta);
  for (int r = 0; r < R; ++r) {
    float* cr = c + r * ldc;
    vf x[4];
    for (int j = 0; j < 4; ++j) x[j] = vec_mul(acc[r][j], va);
    if (nv == kNR) {
      for (int j = 0; j < 4; ++j) store(cr + 4 * j, beta != 0.f ? vec_madd(vb, load(cr + 4 * j), x[j]) : x[j]);
    } else {  // an edge panel: no access past column nv of C
      float t[kNR];
      for (int j = 0; j < 4; ++j) store(t + 4 * j, x[j]);
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

// POWER8 has 512 KiB of L2 per core.
GemmPathImpl vsx_path() { return make_path<kMR, kNR, kTransPanels>("vsx", tile, 512 << 10); }

}  // namespace kiln::native::gemm_detail

#else  // not POWER with VSX: the path is absent

namespace kiln::native::gemm_detail {
GemmPathImpl vsx_path() { return GemmPathImpl{}; }
}  // namespace kiln::native::gemm_detail

#endif
