// Problems of the normalisation family (engine/ops/norm.cpp, dropout.cpp, softmax.cpp): batch
// norm in training and eval, with and without affine weights and running statistics, NCHW and
// channels-last, with the fused ReLU, spatial size 1 and batch 1; dropout at p = 0, 0.3, 0.5;
// softmax and log-softmax over inner and outer layouts, dim 1. float32, float64 and the 16-bit
// types (their statistics and weights float32).
#include <cmath>

#include "kernels/cpu/ref/norm.h"
#include "tests/oracle/problems.h"

namespace kiln::oracle {
namespace {

// Problem variants of batch norm: bit 0 no affine weights, bit 1 no running statistics.
constexpr int kNoAffine = 1, kNoRunning = 2;

std::vector<Problem<BatchNormDesc>> bn_problems(bool fwd) {
  const int64_t shapes[][3] = {{2, 3, 35}, {4, 5, 1}, {1, 16, 9}, {3, 4, 7}};
  std::vector<Problem<BatchNormDesc>> v;
  for (DType t : storage_dtypes())
    for (const auto& s : shapes)
      for (bool training : {true, false})
        for (bool nhwc : {false, true})
          for (int variant : {0, kNoAffine, kNoRunning}) {
            if (variant == kNoRunning && !training) continue;  // eval reads them
            if (t != DType::float32 && variant != 0) continue;
            BatchNormDesc d;
            d.dtype = t;
            d.N = s[0], d.C = s[1], d.S = s[2];
            d.training = training;
            d.nhwc = nhwc;
            const std::string note = std::string(variant & kNoAffine ? "no-affine" : "") +
                                     (variant & kNoRunning ? "no-running-stats" : "");
            v.push_back({d, variant, note});
            if (fwd && variant == 0 && t == DType::float32) {
              d.relu = true;
              v.push_back({d, variant, note});
            }
          }
  return v;
}

Case<kernel_op::batch_norm_fwd> bn_fwd_case() {
  Case<kernel_op::batch_norm_fwd> c;
  c.problems = bn_problems(true);
  c.args = [](const BatchNormDesc& d, int variant) {
    const DType s = side_dtype(d.dtype);
    const bool affine = !(variant & kNoAffine), running = !(variant & kNoRunning);
    return std::vector<Arg>{in("src", d.dtype, d.N * d.C * d.S, uniform(-2, 3)),
                            affine ? in("wei", s, d.C) : none("wei"),
                            affine ? in("bias", s, d.C) : none("bias"),
                            running ? inout("running_mean", s, d.C) : none("running_mean"),
                            running ? inout("running_var", s, d.C, positive()) : none("running_var"),
                            out("dst", d.dtype, d.N * d.C * d.S),
                            out("save_mean", s, d.C),
                            out("save_invstd", s, d.C)};
  };
  return c;
}

Case<kernel_op::batch_norm_bwd> bn_bwd_case() {
  Case<kernel_op::batch_norm_bwd> c;
  c.problems = bn_problems(false);
  c.args = [](const BatchNormDesc& d, int variant) {
    const DType s = side_dtype(d.dtype);
    const bool affine = !(variant & kNoAffine);
    // Saved statistics: training, the batch's own (from src, before[0]); eval, running ones.
    auto stat = [d](bool invstd) -> Gen {
      return [d, invstd](Values& v, Rng& r, const std::vector<Values>& before) {
        const Values& x = before[0];
        const double m = double(d.N * d.S);
        for (int64_t c = 0; c < d.C; ++c) {
          if (!d.training) {
            v[size_t(c)] = invstd ? r.uniform(0.5, 2) : r.uniform(-1, 1);
            continue;
          }
          double sum = 0, sq = 0;
          for (int64_t n = 0; n < d.N; ++n)
            for (int64_t k = 0; k < d.S; ++k) sum += x[size_t(d.at(n, c, k))];
          const double mean = sum / m;
          for (int64_t n = 0; n < d.N; ++n)
            for (int64_t k = 0; k < d.S; ++k) sq += (x[size_t(d.at(n, c, k))] - mean) * (x[size_t(d.at(n, c, k))] - mean);
          v[size_t(c)] = invstd ? 1 / std::sqrt(sq / m + d.eps) : mean;
        }
      };
    };
    return std::vector<Arg>{in("src", d.dtype, d.N * d.C * d.S, uniform(-2, 3)),
                            in("diff_dst", d.dtype, d.N * d.C * d.S),
                            affine ? in("wei", s, d.C) : none("wei"),
                            in("save_mean", s, d.C, stat(false)),
                            in("save_invstd", s, d.C, stat(true)),
                            out("diff_src", d.dtype, d.N * d.C * d.S),
                            affine ? out("diff_wei", s, d.C) : none("diff_wei"),
                            affine ? out("diff_bias", s, d.C) : none("diff_bias")};
  };
  return c;
}

std::vector<DropoutDesc> dropout_problems() {
  std::vector<DropoutDesc> v;
  for (DType t : storage_dtypes())
    for (int64_t n : {37, 1, 1000})
      for (double p : {0.0, 0.3, 0.5}) {
        DropoutDesc d;
        d.dtype = t;
        d.n = n;
        d.p = p;
        d.seed = 42;
        d.offset = 3;
        v.push_back(d);
      }
  return v;
}

// Dropout's mask is Philox (kernels/common/philox.h, counter-based): every backend keeps the
// same elements as ref for (seed, offset), so the mask is compared bit for bit.
std::vector<Arg> dropout_fwd_args(const DropoutDesc& d) {
  Arg mask = out("mask", DType::uint8, d.n);
  mask.fill = 7;
  return {in("src", d.dtype, d.n), out("dst", d.dtype, d.n), mask};
}

std::vector<Arg> dropout_bwd_args(const DropoutDesc& d) {
  return {in("diff_dst", d.dtype, d.n), in("mask", DType::uint8, d.n, integers(0, 1)), out("diff_src", d.dtype, d.n)};
}

std::vector<SoftmaxDesc> softmax_problems() {
  const int64_t shapes[][3] = {{3, 5, 7}, {2, 33, 1}, {1, 1, 4}, {4, 10, 1}, {2, 1000, 1}};  // 1000: many warps per row
  std::vector<SoftmaxDesc> v;
  for (DType t : storage_dtypes())
    for (const auto& s : shapes)
      for (bool log : {false, true}) {
        SoftmaxDesc d;
        d.dtype = t;
        d.outer = s[0], d.dim = s[1], d.inner = s[2];
        d.log = log;
        v.push_back(d);
      }
  return v;
}

std::vector<Arg> softmax_fwd_args(const SoftmaxDesc& d) {
  const int64_t n = d.outer * d.dim * d.inner;
  return {in("src", d.dtype, n, uniform(-4, 4)), out("dst", d.dtype, n)};
}

std::vector<Arg> softmax_bwd_args(const SoftmaxDesc& d) {
  const int64_t n = d.outer * d.dim * d.inner;
  // dst: the ref forward of a draw of logits.
  Gen y = [d](Values& v, Rng& r, const std::vector<Values>&) {
    Values x(v.size());
    for (double& e : x) e = r.uniform(-4, 4);
    ref::softmax_fwd<double>(as_float64(d), x.data(), v.data());
  };
  return {in("dst", d.dtype, n, y), in("diff_dst", d.dtype, n), out("diff_src", d.dtype, n)};
}

}  // namespace

void add_norm(CaseMap& m) {
  add(m, bn_fwd_case());
  add(m, bn_bwd_case());
  add(m, case_over<kernel_op::dropout_fwd>(dropout_problems(), dropout_fwd_args));
  add(m, case_over<kernel_op::dropout_bwd>(dropout_problems(), dropout_bwd_args));
  add(m, case_over<kernel_op::softmax_fwd>(softmax_problems(), softmax_fwd_args));
  add(m, case_over<kernel_op::softmax_bwd>(softmax_problems(), softmax_bwd_args));
}

}  // namespace kiln::oracle
