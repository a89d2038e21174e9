// The cache-blocking loop shared by the ISA paths of the native GEMM (gemm_avx512.cpp,
// gemm_avx2.cpp, gemm_vsx.cpp, gemm_neon.cpp, gemm_sve.cpp): each path brings its register tile
// and micro-kernels, and packing routines of its own or the plain ones below; this loop walks the
// blocks. Included only by those files, each compiled for its own ISA. The
// template sits in an anonymous namespace so every file gets its own copy with internal linkage,
// and the linker can never hand one ISA's instantiation to the other's callers.
//   ctest --test-dir build -R test_gemm         ./build/bench/bench_gemm
#pragma once

#include <cstdint>

#include "kernels/cpu/native/gemm_internal.h"

namespace kiln::native::gemm_detail {
namespace {

// kernel(kc, a, lda, packed_b, c, ldc, n_cols, alpha, beta): MR rows (or fewer) x NR columns.
using KernelFn = void (*)(int64_t, const float*, int64_t, const float*, float*, int64_t, int64_t, float, float);
enum AMode { kPacked = 0, kRows = 1 };  // A packed in panels, or read in place row by row

template <int64_t MR, int64_t NR, int64_t TransPanels, class PackA, class PackB>
void tile_loop(const SgemmArgs& g, const Blocking& blk, int64_t m0, int64_t m1, int64_t n0, int64_t n1, float* pa,
               float* pb, const KernelFn (&kernels)[2][MR + 1], PackA pack_a, PackB pack_b) {
  auto min64 = [](int64_t a, int64_t b) { return a < b ? a : b; };
  // Direct A for few columns of C (packing would be amortised over too few kernel calls), with
  // long k blocks so each row of A is a long sequential stream for the hardware prefetcher; a
  // transposed A is packed TransPanels panels at a time so its rows are read sequentially.
  const bool direct_a = !g.trans_a && g.n <= blk.direct_max_n;
  // Equal k blocks (300 -> 150 + 150, not 256 + 44) so no block is a short, overhead-bound one.
  const int64_t kc_max = direct_a ? blk.kc_direct : blk.kc;
  const int64_t nk = (g.k + kc_max - 1) / kc_max;
  const int64_t kstep = (g.k + nk - 1) / nk;
  const int mode = direct_a ? kRows : kPacked;
  const int64_t mblock = g.trans_a ? MR * TransPanels : MR;
  for (int64_t jc = n0; jc < n1; jc += blk.nc) {
    const int64_t nc = min64(blk.nc, n1 - jc);
    for (int64_t pc = 0; pc < g.k; pc += kstep) {
      const int64_t kc = min64(kstep, g.k - pc);
      const float beta = pc == 0 ? g.beta : 1.f;
      pack_b(g, pc, kc, jc, nc, pb);  // kc x nc: stays in L2 for all the rows below
      for (int64_t ib = m0; ib < m1; ib += mblock) {
        const int64_t mb = min64(mblock, m1 - ib);
        if (!direct_a) pack_a(g, ib, mb, pc, kc, pa);  // packed just before use: it stays in L1 (or L2)
        for (int64_t ir = ib; ir < ib + mb; ir += MR) {
          const int64_t mr = min64(MR, ib + mb - ir);
          const float* a = direct_a ? g.a + ir * g.lda + pc : pa + (ir - ib) * kc;
          const KernelFn kernel = kernels[mode][mr];
          float* c = g.c + ir * g.ldc + jc;
          for (int64_t jr = 0; jr < nc; jr += NR)
            kernel(kc, a, g.lda, pb + jr * kc, c + jr, g.ldc, min64(NR, nc - jr), g.alpha, beta);
        }
      }
    }
  }
}

// Plain packing loops, vectorised by the compiler for the including file's ISA, for the paths
// with no hand-written transposes (VSX, NEON, SVE). The layouts are gemm_avx512.cpp's: op(A) in
// micro-panels of MR rows, k-major inside a panel, rows past mc zero; op(B) in micro-panels of NR
// columns, columns past nc zero.
template <int64_t MR>
void pack_a_plain(const SgemmArgs& g, int64_t i0, int64_t mc, int64_t p0, int64_t kc, float* dst) {
  if (g.trans_a) {  // A is K x M: one pass over each row of A, across all the panels
    for (int64_t p = 0; p < kc; ++p) {
      const float* src = g.a + (p0 + p) * g.lda + i0;
      for (int64_t ir = 0; ir < mc; ir += MR) {
        float* out = dst + ir * kc + p * MR;
        const int64_t mr = mc - ir < MR ? mc - ir : MR;
        for (int64_t r = 0; r < MR; ++r) out[r] = r < mr ? src[ir + r] : 0.f;
      }
    }
    return;
  }
  for (int64_t ir = 0; ir < mc; ir += MR, dst += MR * kc) {  // A is M x K
    const int64_t mr = mc - ir < MR ? mc - ir : MR;
    for (int64_t r = 0; r < MR; ++r) {
      if (r >= mr) {
        for (int64_t p = 0; p < kc; ++p) dst[p * MR + r] = 0.f;
        continue;
      }
      const float* src = g.a + (i0 + ir + r) * g.lda + p0;
      for (int64_t p = 0; p < kc; ++p) dst[p * MR + r] = src[p];
    }
  }
}

template <int64_t NR>
void pack_b_plain(const SgemmArgs& g, int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* dst) {
  for (int64_t jr = 0; jr < nc; jr += NR, dst += NR * kc) {
    const int64_t nr = nc - jr < NR ? nc - jr : NR;
    if (!g.trans_b) {  // B is K x N: NR contiguous values per k step
      for (int64_t p = 0; p < kc; ++p) {
        const float* src = g.b + (p0 + p) * g.ldb + j0 + jr;
        float* out = dst + p * NR;
        if (nr == NR) {
          for (int64_t j = 0; j < NR; ++j) out[j] = src[j];
        } else {
          for (int64_t j = 0; j < NR; ++j) out[j] = j < nr ? src[j] : 0.f;
        }
      }
      continue;
    }
    for (int64_t j = 0; j < NR; ++j) {  // B is N x K: column j of the panel is row j0 + jr + j of B
      if (j >= nr) {
        for (int64_t p = 0; p < kc; ++p) dst[p * NR + j] = 0.f;
        continue;
      }
      const float* src = g.b + (j0 + jr + j) * g.ldb + p0;
      for (int64_t p = 0; p < kc; ++p) dst[p * NR + j] = src[p];
    }
  }
}

// A path's blocking from its register tile: the kc x nc block of B takes half of L2 (1 MiB on
// Sapphire Rapids: nc = 1024); the MR x kc panel of A and the C rows it updates live in L1.
// `l2_default` serves when the cache size cannot be read.
template <int64_t MR, int64_t NR, int64_t TransPanels>
GemmPathImpl make_path(const char* name, TileFn tile, long l2_default) {
  const long l2 = l2_cache_bytes() > 0 ? l2_cache_bytes() : l2_default;
  const int64_t kc = 256;
  int64_t nc = l2 / 2 / (kc * int64_t(sizeof(float))) / NR * NR;
  nc = nc < 4 * NR ? 4 * NR : nc > 4096 ? 4096 : nc;
  GemmPathImpl p;
  p.name = name;
  p.blk = Blocking{MR, NR, /*mc=*/MR * TransPanels, kc, nc, /*direct_max_n=*/4 * NR, /*kc_direct=*/4 * kc};
  p.tile = tile;
  p.gemv = true;
  return p;
}

}  // namespace
}  // namespace kiln::native::gemm_detail
