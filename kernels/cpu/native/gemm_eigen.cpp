// Portable GEMM path through Eigen: used where neither AVX2 nor AVX-512 is available (POWER,
// ARM, old x86), for float64, and when forced with KILN_GEMM=eigen. Eigen's own threading is off
// (EIGEN_DONT_PARALLELIZE): gemm.cpp splits C across threads the same way for every path. Eigen
// headers stay in this one file (they cost seconds of compile time per including file).
//   KILN_GEMM=eigen ./build/bench/bench_gemm         ctest --test-dir build -R test_gemm
#include "kernels/cpu/native/gemm_internal.h"

#ifdef KILN_HAVE_EIGEN
#define EIGEN_DONT_PARALLELIZE
#include <Eigen/Core>

namespace kiln::native::gemm_detail {
namespace {

template <class T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using ConstMap = Eigen::Map<const RowMat<T>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <class T>
using MutMap = Eigen::Map<RowMat<T>, Eigen::Unaligned, Eigen::OuterStride<>>;

// C[m0:m1, n0:n1] of C = alpha op(A) op(B) + beta C. Stored A is (trans_a ? k x m : m x k).
template <class T>
void block(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
           int64_t ldb, T beta, T* c, int64_t ldc, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const int64_t mb = m1 - m0, nb = n1 - n0;
  MutMap<T> cm(c + m0 * ldc + n0, mb, nb, Eigen::OuterStride<>(ldc));
  // Row block of op(A) and column block of op(B), as maps of the stored matrices.
  ConstMap<T> am(ta ? a + m0 : a + m0 * lda, ta ? k : mb, ta ? mb : k, Eigen::OuterStride<>(lda));
  ConstMap<T> bm(tb ? b + n0 * ldb : b + n0, tb ? nb : k, tb ? k : nb, Eigen::OuterStride<>(ldb));
  auto run = [&](const auto& opa, const auto& opb) {
    if (beta == T(0))
      cm.noalias() = alpha * (opa * opb);  // C is only written
    else {
      if (beta != T(1)) cm *= beta;
      cm.noalias() += alpha * (opa * opb);
    }
  };
  if (!ta && !tb) run(am, bm);
  else if (ta && !tb) run(am.transpose(), bm);
  else if (!ta && tb) run(am, bm.transpose());
  else run(am.transpose(), bm.transpose());
}

void tile(const SgemmArgs& g, const Blocking&, int64_t m0, int64_t m1, int64_t n0, int64_t n1, float*, float*) {
  block<float>(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, g.c, g.ldc, m0, m1, n0, n1);
}

}  // namespace

GemmPathImpl eigen_path() {
  GemmPathImpl p;
  p.name = "eigen";
  // Eigen packs internally: no kiln pack buffers (mc = kc = 0); nc only guides the thread split.
  p.blk = Blocking{8, 8, /*mc=*/0, /*kc=*/0, /*nc=*/4096};
  p.tile = tile;
  return p;
}

bool eigen_dgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
                 const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  block<double>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, 0, m, 0, n);
  return true;
}

}  // namespace kiln::native::gemm_detail

#else

namespace kiln::native::gemm_detail {
GemmPathImpl eigen_path() { return GemmPathImpl{}; }
bool eigen_dgemm(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t, const double*, int64_t, double,
                 double*, int64_t) {
  return false;
}
}  // namespace kiln::native::gemm_detail

#endif
