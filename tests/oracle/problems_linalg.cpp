// Problems of the linear-algebra family (engine/ops/linalg.cpp): gemm (both transposes, padded
// leading dimensions, alpha/beta, batches with dense, shared (stride 0) and padded strides, a
// 1x1x1 product, sizes that are not multiples of any register tile) and the inner product's
// three passes (with and without bias, batch 1).
#include "tests/oracle/problems.h"

namespace kiln::oracle {
namespace {

struct GemmSpec {
  int64_t m, n, k;
  bool ta, tb;
  int64_t pad = 0;  // added to every leading dimension
  double alpha = 1, beta = 0;
  int64_t batch = 1;
  bool shared_a = false;  // stride_a = 0: one A for every product
  bool shared_b = false;  // stride_b = 0: one B for every product
};

GemmDesc gemm_desc(const GemmSpec& s, DType t) {
  GemmDesc d;
  d.dtype = t;
  d.m = s.m, d.n = s.n, d.k = s.k;
  d.trans_a = s.ta, d.trans_b = s.tb;
  d.lda = (s.ta ? s.m : s.k) + s.pad;
  d.ldb = (s.tb ? s.k : s.n) + s.pad;
  d.ldc = s.n + s.pad;
  d.alpha = s.alpha, d.beta = s.beta;
  d.batch = s.batch;
  if (s.batch > 1) {
    d.stride_a = s.shared_a ? 0 : (s.ta ? s.k : s.m) * d.lda + s.pad;
    d.stride_b = s.shared_b ? 0 : (s.tb ? s.n : s.k) * d.ldb + s.pad;
    d.stride_c = s.m * d.ldc + s.pad;
  }
  return d;
}

int64_t span(int64_t batch, int64_t stride, int64_t rows, int64_t ld, int64_t cols) {
  return (batch - 1) * stride + (rows - 1) * ld + cols;
}

Case<kernel_op::gemm> gemm_case() {
  Case<kernel_op::gemm> c;
  std::vector<GemmSpec> specs;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      specs.push_back({5, 7, 9, ta, tb});
      specs.push_back({17, 33, 70, ta, tb});
      specs.push_back({1, 1, 1, ta, tb});
      specs.push_back({6, 16, 8, ta, tb, 3, 0.5, 0.75});
      specs.push_back({4, 5, 6, ta, tb, 0, 1, 0, 3});
    }
  // Past 64 in m and n: kiln's CUDA GEMM takes its 128x128 tile kernel; padded to multiples of 4
  // its float4 loads.
  specs.push_back({130, 65, 33, false, false, 3});
  specs.push_back({65, 130, 33, true, true});
  specs.push_back({4, 5, 6, false, false, 2, 1, 1, 3});
  specs.push_back({4, 5, 6, true, false, 0, 2, 0, 3, true});
  specs.push_back({3, 4, 6, false, true, 1, 1, -2, 3, false, true});
  for (DType t : float_dtypes())
    for (const GemmSpec& s : specs) c.problems.push_back({gemm_desc(s, t)});
  c.args = [](const GemmDesc& d, int) {
    const int64_t a = span(d.batch, d.stride_a, d.trans_a ? d.k : d.m, d.lda, d.trans_a ? d.m : d.k);
    const int64_t b = span(d.batch, d.stride_b, d.trans_b ? d.n : d.k, d.ldb, d.trans_b ? d.k : d.n);
    const int64_t n = span(d.batch, d.stride_c, d.m, d.ldc, d.n);
    // C: the product's elements are NaN when beta == 0 (C must not be read), else inputs; the
    // gaps of ldc and the batch stride hold 96 and must stay so.
    Gen gc = [d](Values& v, Rng& r, const std::vector<Values>&) {
      for (double& x : v) x = 96;
      for (int64_t p = 0; p < d.batch; ++p)
        for (int64_t i = 0; i < d.m; ++i)
          for (int64_t j = 0; j < d.n; ++j)
            v[size_t(p * d.stride_c + i * d.ldc + j)] = d.beta == 0 ? NAN : r.uniform(-1, 1);
    };
    return std::vector<Arg>{in("a", d.dtype, a), in("b", d.dtype, b), inout("c", d.dtype, n, gc)};
  };
  return c;
}

std::vector<LinearDesc> linear_problems() {
  std::vector<LinearDesc> v;
  const int64_t shapes[][3] = {{5, 7, 9}, {1, 70, 3}, {16, 33, 17}, {3, 129, 1}};
  for (DType t : float_dtypes())
    for (const auto& s : shapes)
      for (bool bias : {true, false}) {
        LinearDesc d;
        d.dtype = t;
        d.n = s[0], d.ic = s[1], d.oc = s[2];
        d.has_bias = bias;
        v.push_back(d);
      }
  return v;
}

}  // namespace

void add_linalg(CaseMap& m) {
  add(m, gemm_case());
  add(m, case_over<kernel_op::linear_fwd>(linear_problems(), [](const LinearDesc& d) {
    return std::vector<Arg>{in("src", d.dtype, d.n * d.ic), in("wei", d.dtype, d.oc * d.ic),
                            d.has_bias ? in("bias", d.dtype, d.oc) : none("bias"), out("dst", d.dtype, d.n * d.oc)};
  }));
  add(m, case_over<kernel_op::linear_bwd_data>(linear_problems(), [](const LinearDesc& d) {
    return std::vector<Arg>{in("diff_dst", d.dtype, d.n * d.oc), in("wei", d.dtype, d.oc * d.ic),
                            out("diff_src", d.dtype, d.n * d.ic)};
  }));
  // Variant 1: only the bias gradient wanted (diff_wei null).
  Case<kernel_op::linear_bwd_weights> bw;
  for (const LinearDesc& d : linear_problems()) {
    bw.problems.push_back({d});
    if (d.has_bias) bw.problems.push_back({d, 1, "bias gradient only"});
  }
  bw.args = [](const LinearDesc& d, int variant) {
    return std::vector<Arg>{in("src", d.dtype, d.n * d.ic), in("diff_dst", d.dtype, d.n * d.oc),
                            variant ? none("diff_wei") : out("diff_wei", d.dtype, d.oc * d.ic),
                            d.has_bias ? out("diff_bias", d.dtype, d.oc) : none("diff_bias")};
  };
  add(m, bw);
}

}  // namespace kiln::oracle
