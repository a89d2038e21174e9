// AVX-512 single-precision GEMM path: BLIS-style packing and cache blocking around a 12 x 32
// register tile (24 zmm accumulators, 2 zmm of B and one broadcast of A per k step: 24 FMAs
// against 3 loads, so the two FMA ports stay busy; about 190 GFLOP/s of the ~210 peak on its
// own). Loop order per thread rectangle: for each kc x nc block of B (packed once, kept in L2),
// for each 12-row panel of A (packed just before use, kept in L1), sweep the 32-column panels of
// B. Narrow C (<= 128 columns) reads A in place with long k blocks instead of packing it.
// Compiled with -mavx512f alone (it runs on Knights Landing); gemm.cpp calls it where has_avx512f().
//   KILN_GEMM=avx512 ./build/bench/bench_gemm        ctest --test-dir build -R test_gemm
#include "kernels/cpu/native/gemm_internal.h"

#if defined(__AVX512F__)
// GCC 12's own intrinsics use _mm512_undefined_ps() and trip its -Wmaybe-uninitialized (GCC bug
// 105593, fixed in 13).
#if !defined(__clang__)  // clang has no such warning group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "kernels/cpu/native/gemm_tile.h"

namespace kiln::native::gemm_detail {
namespace {

constexpr int kMR = 12;
constexpr int kNR = 32;
constexpr int64_t kTransPanels = 16;  // a transposed A is packed this many panels at a time

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
inline __mmask16 tail_mask(int64_t n) { return n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1u); }

// In-register 16 x 16 transpose: r[i] holds row i on entry and column i on exit.
inline void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  // u[4i + q], 128-bit lane L: column 4L + q of rows 4i .. 4i + 3.
  __m512 u[16];
  for (int i = 0; i < 16; i += 4) {
    __m512d a0 = _mm512_castps_pd(t[i]), a1 = _mm512_castps_pd(t[i + 1]);
    __m512d a2 = _mm512_castps_pd(t[i + 2]), a3 = _mm512_castps_pd(t[i + 3]);
    u[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a0, a2));
    u[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a0, a2));
    u[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(a1, a3));
    u[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(a1, a3));
  }
  for (int q = 0; q < 4; ++q) {
    __m512 x0 = _mm512_shuffle_f32x4(u[q], u[4 + q], 0x44), x1 = _mm512_shuffle_f32x4(u[q], u[4 + q], 0xee);
    __m512 y0 = _mm512_shuffle_f32x4(u[8 + q], u[12 + q], 0x44), y1 = _mm512_shuffle_f32x4(u[8 + q], u[12 + q], 0xee);
    r[q] = _mm512_shuffle_f32x4(x0, y0, 0x88);
    r[4 + q] = _mm512_shuffle_f32x4(x0, y0, 0xdd);
    r[8 + q] = _mm512_shuffle_f32x4(x1, y1, 0x88);
    r[12 + q] = _mm512_shuffle_f32x4(x1, y1, 0xdd);
  }
}

// Packs op(A)[i0 : i0 + mc, p0 : p0 + kc] as micro-panels of kMR rows: panel q holds, for each p,
// the kMR values op(A)[i0 + q * kMR + r, p0 + p] contiguously (rows past mc are zero).
void pack_a(const SgemmArgs& g, int64_t i0, int64_t mc, int64_t p0, int64_t kc, float* dst) {
  const __mmask16 out_mask = __mmask16((1u << kMR) - 1u);
  if (g.trans_a) {
    // A is K x M: walk each row of A once across all the panels, so the reads stay sequential
    // (panel by panel would touch kc rows 48 bytes at a time, which no prefetcher follows).
    for (int64_t p = 0; p < kc; ++p) {
      const float* src = g.a + (p0 + p) * g.lda + i0;
      for (int64_t ir = 0; ir < mc; ir += kMR)
        _mm512_mask_storeu_ps(dst + ir * kc + p * kMR, out_mask, _mm512_maskz_loadu_ps(tail_mask(min64(kMR, mc - ir)), src + ir));
    }
    return;
  }
  for (int64_t ir = 0; ir < mc; ir += kMR, dst += kMR * kc) {
    // A is M x K: transpose 16 k steps of the kMR rows at a time
    const int64_t mr = min64(kMR, mc - ir);
    const float* src = g.a + (i0 + ir) * g.lda + p0;
    for (int64_t p = 0; p < kc; p += 16) {
      const int64_t pl = min64(16, kc - p);
      const __mmask16 m = tail_mask(pl);
      __m512 r[16];
      for (int i = 0; i < 16; ++i) r[i] = i < mr ? _mm512_maskz_loadu_ps(m, src + i * g.lda + p) : _mm512_setzero_ps();
      transpose16(r);
      for (int64_t c = 0; c < pl; ++c) _mm512_mask_storeu_ps(dst + (p + c) * kMR, out_mask, r[c]);
    }
  }
}

// Packs op(B)[p0 : p0 + kc, j0 : j0 + nc] as micro-panels of kNR columns: panel q holds, for each
// p, the kNR values op(B)[p0 + p, j0 + q * kNR + j] (64-byte aligned; columns past nc are zero).
void pack_b(const SgemmArgs& g, int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* dst) {
  if (!g.trans_b) {
    // B is K x N: a row of B is a k step of every panel. Walk each row once, left to right, so the
    // reads are sequential (panel by panel would hop across kc rows 128 bytes at a time).
    for (int64_t p = 0; p < kc; ++p) {
      const float* src = g.b + (p0 + p) * g.ldb + j0;
      float* out = dst + p * kNR;
      int64_t jr = 0;
      for (; jr + kNR <= nc; jr += kNR, out += kNR * kc) {
        _mm512_store_ps(out, _mm512_loadu_ps(src + jr));
        _mm512_store_ps(out + 16, _mm512_loadu_ps(src + jr + 16));
      }
      if (jr < nc) {
        const int64_t nr = nc - jr;
        _mm512_store_ps(out, _mm512_maskz_loadu_ps(tail_mask(nr), src + jr));
        _mm512_store_ps(out + 16, _mm512_maskz_loadu_ps(tail_mask(nr > 16 ? nr - 16 : 0), src + jr + 16));
      }
    }
    return;
  }
  // B is N x K: transpose 16 x 16 blocks (16 rows of B read sequentially at a time).
  for (int64_t jr = 0; jr < nc; jr += kNR, dst += kNR * kc) {
    for (int h = 0; h < 2; ++h) {
      const int64_t nh = min64(kNR, nc - jr) - 16 * h;  // valid rows of B in this half
      const float* src = g.b + (j0 + jr + 16 * h) * g.ldb + p0;
      for (int64_t p = 0; p < kc; p += 16) {
        const int64_t pl = min64(16, kc - p);
        const __mmask16 m = tail_mask(pl);
        __m512 r[16];
        for (int i = 0; i < 16; ++i) r[i] = i < nh ? _mm512_maskz_loadu_ps(m, src + i * g.ldb + p) : _mm512_setzero_ps();
        transpose16(r);
        for (int64_t c = 0; c < pl; ++c) _mm512_store_ps(dst + (p + c) * kNR + 16 * h, r[c]);
      }
    }
  }
}

// Where the kernel reads A: a packed micro-panel, or A itself when packing would cost more than
// it saves (few columns of C per row of A): element (r, p) at a[r * lda + p].

// C[R x nv] = alpha * A[R x kc] * Bpanel + beta * C (beta == 0: C is not read). nv <= kNR.
template <int R, int Mode>
void micro_kernel(int64_t kc, const float* __restrict a, int64_t lda, const float* __restrict b, float* c, int64_t ldc,
                  int64_t nv, float alpha, float beta) {
  constexpr int64_t kStep = Mode == kPacked ? kMR : 1;
  __m512 acc0[R], acc1[R];
  for (int r = 0; r < R; ++r) {
    acc0[r] = _mm512_setzero_ps();
    acc1[r] = _mm512_setzero_ps();
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + 16), _MM_HINT_T0);
  }
  // do-while: kc >= 1, and with a loop that may run zero times GCC keeps the accumulators in
  // memory and stores them on every k step.
  int64_t steps = kc;
  do {
    const __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
    if (Mode == kPacked) _mm_prefetch(reinterpret_cast<const char*>(a + 16 * kMR), _MM_HINT_T0);
    // The B panel streams from L2: asking 8 k steps ahead measured 2-5% faster than leaving it
    // to the hardware prefetcher.
    _mm_prefetch(reinterpret_cast<const char*>(b + 8 * kNR), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(b + 8 * kNR + 16), _MM_HINT_T0);
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(Mode == kRows ? a[r * lda] : a[r]);
      acc0[r] = _mm512_fmadd_ps(av, b0, acc0[r]);
      acc1[r] = _mm512_fmadd_ps(av, b1, acc1[r]);
    }
    a += kStep;
    b += kNR;
  } while (--steps > 0);
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  if (nv == kNR) {
    for (int r = 0; r < R; ++r) {
      float* cr = c + r * ldc;
      __m512 x0 = _mm512_mul_ps(acc0[r], va), x1 = _mm512_mul_ps(acc1[r], va);
      if (beta != 0.f) {
        x0 = _mm512_fmadd_ps(vb, _mm512_loadu_ps(cr), x0);
        x1 = _mm512_fmadd_ps(vb, _mm512_loadu_ps(cr + 16), x1);
      }
      _mm512_storeu_ps(cr, x0);
      _mm512_storeu_ps(cr + 16, x1);
    }
  } else {
    const __mmask16 m0 = tail_mask(nv), m1 = tail_mask(nv > 16 ? nv - 16 : 0);
    for (int r = 0; r < R; ++r) {
      float* cr = c + r * ldc;
      __m512 x0 = _mm512_mul_ps(acc0[r], va), x1 = _mm512_mul_ps(acc1[r], va);
      if (beta != 0.f) {
        x0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, cr), x0);
        x1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, cr + 16), x1);
      }
      _mm512_mask_storeu_ps(cr, m0, x0);
      _mm512_mask_storeu_ps(cr + 16, m1, x1);
    }
  }
}

#define KILN_KERNELS(mode)                                                                                      \
  {                                                                                                             \
    nullptr, micro_kernel<1, mode>, micro_kernel<2, mode>, micro_kernel<3, mode>, micro_kernel<4, mode>,        \
        micro_kernel<5, mode>, micro_kernel<6, mode>, micro_kernel<7, mode>, micro_kernel<8, mode>,             \
        micro_kernel<9, mode>, micro_kernel<10, mode>, micro_kernel<11, mode>, micro_kernel<12, mode>           \
  }
constexpr KernelFn kKernels[2][kMR + 1] = {KILN_KERNELS(kPacked), KILN_KERNELS(kRows)};
#undef KILN_KERNELS

void tile(const SgemmArgs& g, const Blocking& blk, int64_t m0, int64_t m1, int64_t n0, int64_t n1, float* pa,
          float* pb) {
  tile_loop<kMR, kNR, kTransPanels>(g, blk, m0, m1, n0, n1, pa, pb, kKernels, pack_a, pack_b);
}

}  // namespace

GemmPathImpl avx512_path() { return make_path<kMR, kNR, kTransPanels>("avx512", tile, 1 << 20); }

}  // namespace kiln::native::gemm_detail

#else  // built without AVX-512 flags (a non-x86 target): the path is absent

namespace kiln::native::gemm_detail {
GemmPathImpl avx512_path() { return GemmPathImpl{}; }
}  // namespace kiln::native::gemm_detail

#endif
