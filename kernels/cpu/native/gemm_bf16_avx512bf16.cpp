// AVX512_BF16 path of the bfloat16 GEMM (gemm_bf16.h): packing and cache blocking around a 12 x 32
// register tile of vdpbf16ps. Per k pair and row, one broadcast 32-bit word of A (the row's two
// bfloat16 values at k = 2p, 2p + 1) meets two zmm of B (32 columns, each a pair); each
// vdpbf16ps adds both products to a float32 lane: 24 instructions against 3 loads per k pair, 768
// multiply-adds. Loop order per thread rectangle, as gemm_avx512.cpp: for each kc x nc block of B
// (packed once, kept in L2), for each 12-row panel of A (packed just before use, kept in L1),
// sweep the 32-column panels of B. Narrow C (<= 128 columns) reads an untransposed A in place,
// a pair at a time, with long k blocks instead of packing it.
// Packed layouts, in 32-bit words (low half: the even k): A panels of kMR rows, word p * kMR + r
// = pair p of row r; B panels of kNR columns, word p * kNR + j = pair p of column j. Rows past m,
// columns past n and the second half of an odd k's last pair are zero.
// Compiled with -mavx512f -mavx512bf16 -mavx512bw -mavx512vl; gemm_bf16.cpp calls it only where
// the CPU has AVX512_BF16 and AVX-512BW.
//   KILN_GEMM_BF16=avx512_bf16 ./build/bench/bench_gemm_bf16      ctest --test-dir build -R kernels.test_gemm_bf16
#include "kernels/cpu/native/gemm_bf16_internal.h"

#if defined(__AVX512BF16__) && defined(__AVX512BW__) && defined(__AVX512VL__)
// GCC 12's own intrinsics use _mm512_undefined_ps() and trip its -Wmaybe-uninitialized (GCC bug
// 105593, fixed in 13).
#if !defined(__clang__)  // clang has no such warning group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstring>

namespace kiln::native::gemm_bf16_detail {
namespace {

constexpr int kMR = 12;
constexpr int kNR = 32;
constexpr int64_t kTransPanels = 8;  // a transposed A is packed this many panels at a time

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
inline __mmask16 mask16(int64_t n) { return n >= 16 ? __mmask16(0xffff) : n <= 0 ? 0 : __mmask16((1u << n) - 1u); }
inline __mmask32 mask32(int64_t n) { return n >= 32 ? __mmask32(0xffffffffu) : n <= 0 ? 0 : __mmask32((1u << n) - 1u); }

// In-register 16 x 16 transpose of 32-bit elements: r[i] holds row i on entry and column i on exit.
inline void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
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

// 16 pairs from two rows of 16 bfloat16 each (lo: the even k, hi: the odd one; either may be
// fewer than 16 valid values, masked to zero).
inline __m512i pairs16(const uint16_t* lo, const uint16_t* hi, __mmask16 m) {
  const __m512i a = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, lo));
  if (!hi) return a;
  const __m512i b = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, hi));
  return _mm512_or_si512(a, _mm512_slli_epi32(b, 16));
}

// A row-major stretch of pairs, transposed: 16 rows (src + i * ld, fewer than `rows` are zero), kc
// bfloat16 values from each (pairs [p, p + 16) of them), into r[c] = pair p + c of every row.
inline void load_pair_block(const uint16_t* src, int64_t ld, int64_t rows, int64_t p, int64_t kc, __m512 r[16]) {
  const __mmask32 m = mask32(kc - 2 * p);
  for (int i = 0; i < 16; ++i)
    r[i] = i < rows ? _mm512_castsi512_ps(_mm512_maskz_loadu_epi16(m, src + i * ld + 2 * p)) : _mm512_setzero_ps();
  transpose16(r);
}

// op(A)[i0 : i0 + mc, p0 : p0 + kc] into panels of kMR rows (layout above).
void pack_a(const Bf16Args& g, int64_t i0, int64_t mc, int64_t p0, int64_t kc, uint32_t* dst) {
  const int64_t kp = (kc + 1) / 2;
  const __mmask16 out_mask = __mmask16((1u << kMR) - 1u);
  if (g.trans_a) {
    // A is K x M: pair p of row i is (a[2p][i], a[2p + 1][i]); walk two rows of A at a time across
    // all the panels, so the reads stay sequential.
    for (int64_t p = 0; p < kp; ++p) {
      const uint16_t* lo = g.a + (p0 + 2 * p) * g.lda + i0;
      const uint16_t* hi = 2 * p + 1 < kc ? lo + g.lda : nullptr;
      for (int64_t ir = 0; ir < mc; ir += kMR)
        _mm512_mask_storeu_epi32(dst + ir * kp + p * kMR, out_mask,
                                 pairs16(lo + ir, hi ? hi + ir : nullptr, mask16(min64(kMR, mc - ir))));
    }
    return;
  }
  // A is M x K: a row's pairs are consecutive 32-bit words; transpose 16 pairs of the kMR rows at a time.
  for (int64_t ir = 0; ir < mc; ir += kMR, dst += kMR * kp) {
    const int64_t mr = min64(kMR, mc - ir);
    const uint16_t* src = g.a + (i0 + ir) * g.lda + p0;
    for (int64_t p = 0; p < kp; p += 16) {
      __m512 r[16];
      load_pair_block(src, g.lda, mr, p, kc, r);
      for (int64_t c = 0; c < min64(16, kp - p); ++c)
        _mm512_mask_storeu_ps(reinterpret_cast<float*>(dst + (p + c) * kMR), out_mask, r[c]);
    }
  }
}

// op(B)[p0 : p0 + kc, j0 : j0 + nc] into panels of kNR columns (layout above; 64-byte aligned).
void pack_b(const Bf16Args& g, int64_t p0, int64_t kc, int64_t j0, int64_t nc, uint32_t* dst) {
  const int64_t kp = (kc + 1) / 2;
  if (!g.trans_b) {
    // B is K x N: pair p of column j is (b[2p][j], b[2p + 1][j]); two rows of B make a k pair of
    // every panel, read left to right.
    for (int64_t p = 0; p < kp; ++p) {
      const uint16_t* lo = g.b + (p0 + 2 * p) * g.ldb + j0;
      const uint16_t* hi = 2 * p + 1 < kc ? lo + g.ldb : nullptr;
      uint32_t* out = dst + p * kNR;
      for (int64_t jr = 0; jr < nc; jr += kNR, out += kNR * kp) {
        const int64_t nr = min64(kNR, nc - jr);
        _mm512_store_si512(out, pairs16(lo + jr, hi ? hi + jr : nullptr, mask16(nr)));
        _mm512_store_si512(out + 16, pairs16(lo + jr + 16, hi ? hi + jr + 16 : nullptr, mask16(nr - 16)));
      }
    }
    return;
  }
  // B is N x K: column j of op(B) is row j of B, its pairs consecutive words: transpose 16 x 16
  // word blocks.
  for (int64_t jr = 0; jr < nc; jr += kNR, dst += kNR * kp) {
    for (int h = 0; h < 2; ++h) {
      const int64_t nh = min64(kNR, nc - jr) - 16 * h;  // valid columns in this half
      const uint16_t* src = g.b + (j0 + jr + 16 * h) * g.ldb + p0;
      for (int64_t p = 0; p < kp; p += 16) {
        __m512 r[16];
        load_pair_block(src, g.ldb, nh, p, kc, r);
        for (int64_t c = 0; c < min64(16, kp - p); ++c)
          _mm512_store_ps(reinterpret_cast<float*>(dst + (p + c) * kNR + 16 * h), r[c]);
      }
    }
  }
}

inline __m512bh as_bh(__m512i x) { return (__m512bh)x; }

enum AMode { kPacked = 0, kRows = 1 };  // A packed in panels, or read in place row by row

// C[R x nv] = alpha * A * Bpanel + beta * C over kp pairs (beta == 0: C is not read). nv <= kNR.
// A: a packed panel (kPacked), or R rows of bfloat16 at a + r * lda, read a pair (32 bits) at a
// time (kRows; every pair whole: the caller packs an odd block instead).
template <int R, int Mode>
void micro_kernel(int64_t kp, const uint16_t* __restrict a, int64_t lda, const uint32_t* __restrict b, float* c,
                  int64_t ldc, int64_t nv, float alpha, float beta) {
  __m512 acc0[R], acc1[R];
  for (int r = 0; r < R; ++r) {
    acc0[r] = _mm512_setzero_ps();
    acc1[r] = _mm512_setzero_ps();
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + 16), _MM_HINT_T0);
  }
  // do-while: kp >= 1 (see gemm_avx512.cpp: a loop that may run zero times keeps the
  // accumulators in memory).
  int64_t steps = kp;
  do {
    const __m512bh b0 = as_bh(_mm512_load_si512(b)), b1 = as_bh(_mm512_load_si512(b + 16));
    if (Mode == kPacked) _mm_prefetch(reinterpret_cast<const char*>(a + 32 * kMR), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(b + 8 * kNR), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(b + 8 * kNR + 16), _MM_HINT_T0);
    for (int r = 0; r < R; ++r) {
      int pair;
      std::memcpy(&pair, Mode == kRows ? a + r * lda : a + 2 * r, 4);
      const __m512bh av = as_bh(_mm512_set1_epi32(pair));
      acc0[r] = _mm512_dpbf16_ps(acc0[r], av, b0);
      acc1[r] = _mm512_dpbf16_ps(acc1[r], av, b1);
    }
    a += Mode == kRows ? 2 : 2 * kMR;
    b += kNR;
  } while (--steps > 0);
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  const __mmask16 m0 = mask16(nv), m1 = mask16(nv - 16);
  for (int r = 0; r < R; ++r) {
    float* cr = c + r * ldc;
    __m512 x0 = _mm512_mul_ps(acc0[r], va), x1 = _mm512_mul_ps(acc1[r], va);
    if (nv == kNR) {
      if (beta != 0.f) {
        x0 = _mm512_fmadd_ps(vb, _mm512_loadu_ps(cr), x0);
        x1 = _mm512_fmadd_ps(vb, _mm512_loadu_ps(cr + 16), x1);
      }
      _mm512_storeu_ps(cr, x0);
      _mm512_storeu_ps(cr + 16, x1);
    } else {
      if (beta != 0.f) {
        x0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, cr), x0);
        x1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, cr + 16), x1);
      }
      _mm512_mask_storeu_ps(cr, m0, x0);
      _mm512_mask_storeu_ps(cr + 16, m1, x1);
    }
  }
}

using KernelFn = void (*)(int64_t, const uint16_t*, int64_t, const uint32_t*, float*, int64_t, int64_t, float, float);
#define KILN_KERNELS(mode)                                                                                      \
  {                                                                                                             \
    nullptr, micro_kernel<1, mode>, micro_kernel<2, mode>, micro_kernel<3, mode>, micro_kernel<4, mode>,        \
        micro_kernel<5, mode>, micro_kernel<6, mode>, micro_kernel<7, mode>, micro_kernel<8, mode>,             \
        micro_kernel<9, mode>, micro_kernel<10, mode>, micro_kernel<11, mode>, micro_kernel<12, mode>           \
  }
constexpr KernelFn kKernels[2][kMR + 1] = {KILN_KERNELS(kPacked), KILN_KERNELS(kRows)};
#undef KILN_KERNELS

void tile(const Bf16Args& g, const Bf16Blocking& blk, int64_t m0, int64_t m1, int64_t n0, int64_t n1, uint32_t* pa,
          uint32_t* pb) {
  // Equal k blocks, each even but the last (a pair never straddles two blocks); the blocking
  // depends on k alone, so the bits do not depend on how C was split across threads.
  const bool direct_a = !g.trans_a && g.n <= blk.direct_max_n;
  const int64_t kc_max = direct_a ? blk.kc_direct : blk.kc;
  const int64_t nk = (g.k + kc_max - 1) / kc_max;
  const int64_t kstep = ((g.k + nk - 1) / nk + 1) / 2 * 2;
  const int64_t mblock = g.trans_a ? kMR * kTransPanels : kMR;
  for (int64_t jc = n0; jc < n1; jc += blk.nc) {
    const int64_t nc = min64(blk.nc, n1 - jc);
    for (int64_t pc = 0; pc < g.k; pc += kstep) {
      const int64_t kc = min64(kstep, g.k - pc), kp = (kc + 1) / 2;
      const float beta = pc == 0 ? g.beta : 1.f;
      // An odd (last) block is packed even in direct mode: its last pair would read past the row.
      const int mode = direct_a && kc % 2 == 0 ? kRows : kPacked;
      pack_b(g, pc, kc, jc, nc, pb);  // kc x nc: stays in L2 for all the rows below
      for (int64_t ib = m0; ib < m1; ib += mblock) {
        const int64_t mb = min64(mblock, m1 - ib);
        if (mode == kPacked) pack_a(g, ib, mb, pc, kc, pa);  // packed just before use: it stays in L1 (or L2)
        for (int64_t ir = ib; ir < ib + mb; ir += kMR) {
          const int64_t mr = min64(kMR, ib + mb - ir);
          const uint16_t* a = mode == kRows ? g.a + ir * g.lda + pc : reinterpret_cast<const uint16_t*>(pa + (ir - ib) * kp);
          float* c = g.c + ir * g.ldc + jc;
          for (int64_t jr = 0; jr < nc; jr += kNR)
            kKernels[mode][mr](kp, a, g.lda, pb + jr * kp, c + jr, g.ldc, min64(kNR, nc - jr), g.alpha, beta);
        }
      }
    }
  }
}

// BFloat16::from_float on 16 lanes: + 0x7fff + the kept lsb, then the high half; NaN keeps its
// high half with the quiet bit set. (vcvtneps2bf16 would flush denormals, which the scalar
// conversion keeps.)
inline __m256i to_bf16(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i hi = _mm512_srli_epi32(u, 16);
  const __m512i lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(hi, _mm512_set1_epi32(0x40)));
  return _mm512_cvtepi32_epi16(r);
}

void round_row(const float* t, int64_t n, float beta, const float* bias, bool relu, uint16_t* out) {
  const __m512 vb = _mm512_set1_ps(beta), zero = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = mask16(n - j);
    __m512 v = _mm512_maskz_loadu_ps(m, t + j);
    if (beta != 0.f) {  // multiply, then add: the scalar loop's two roundings
      const __m512 old = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, out + j)), 16));
      v = _mm512_add_ps(v, _mm512_mul_ps(vb, old));
    }
    if (bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, bias + j));
    if (relu) v = _mm512_max_ps(v, zero);  // NaN and -0 give +0, as v > 0 ? v : 0 does
    _mm256_mask_storeu_epi16(out + j, m, to_bf16(v));
  }
}

}  // namespace

Bf16PathImpl avx512_bf16_path(long l2_bytes) {
  // kc = 512 values (256 pairs, 1 KiB of a packed B column: the float32 path's 256 floats); the
  // kc x nc block of B takes half of L2.
  const long l2 = l2_bytes > 0 ? l2_bytes : 1L << 20;
  const int64_t kc = 512;
  int64_t nc = l2 / 2 / (kc / 2 * 4) / kNR * kNR;
  nc = nc < 4 * kNR ? 4 * kNR : nc > 4096 ? 4096 : nc;
  Bf16PathImpl p;
  p.name = "avx512_bf16";
  p.blk = Bf16Blocking{kMR, kNR, kMR * kTransPanels, kc, nc, /*direct_max_n=*/4 * kNR, /*kc_direct=*/4 * kc};
  p.tile = tile;
  p.round_row = round_row;
  return p;
}

}  // namespace kiln::native::gemm_bf16_detail

#else  // built without AVX512_BF16 flags (another architecture): the path is absent

namespace kiln::native::gemm_bf16_detail {
Bf16PathImpl avx512_bf16_path(long) { return Bf16PathImpl{}; }
}  // namespace kiln::native::gemm_bf16_detail

#endif
