// Problems of the loss family (engine/ops/loss.cpp): cross-entropy and NLL over [N, C] and
// [N, C, S], one class, batch 1, each reduction, label smoothing, ignored targets (ignore_index
// outside and inside [0, C)); BCE-with-logits and MSE with each reduction, with and without
// pos_weight and the target's gradient. Valid class indices; at least one target not ignored.
#include "kernels/cpu/ref/loss.h"
#include "tests/oracle/problems.h"

namespace kiln::oracle {
namespace {

std::vector<ClassLossDesc> class_problems(bool smoothing) {
  const int64_t shapes[][3] = {{4, 5, 1}, {2, 7, 6}, {1, 10, 1}, {3, 1, 2}, {3, 1000, 1}};  // 1000: a warp loops over classes
  std::vector<ClassLossDesc> v;
  for (DType t : float_dtypes())
    for (const auto& s : shapes)
      for (Reduction r : {Reduction::none, Reduction::mean, Reduction::sum})
        for (int64_t ignore : {int64_t(-100), int64_t(1)}) {
          if (ignore == 1 && s[1] < 3) continue;
          for (double eps : {0.0, 0.1}) {
            if (eps > 0 && !smoothing) continue;
            ClassLossDesc d;
            d.dtype = t;
            d.N = s[0], d.C = s[1], d.S = s[2];
            d.reduction = r;
            d.label_smoothing = eps;
            d.ignore_index = ignore;
            v.push_back(d);
          }
        }
  return v;
}

// Targets in [0, C); every fourth one ignore_index (the first never).
Gen targets(const ClassLossDesc& d) {
  return [d](Values& v, Rng& r, const std::vector<Values>&) {
    for (size_t i = 0; i < v.size(); ++i) v[i] = i % 4 == 3 ? double(d.ignore_index) : double(r.integer(0, d.C - 1));
    if (!v.empty() && v[0] == double(d.ignore_index)) v[0] = double((d.ignore_index + 1) % d.C);
  };
}

int64_t loss_elems(Reduction r, int64_t n) { return r == Reduction::none ? n : 1; }

// Problem variants of the point losses: bit 0 with pos_weight (BCE), bit 1 without diff_target.
constexpr int kPosWeight = 1, kNoDiffTarget = 2;

template <class Op>
Case<Op> point_case(std::function<std::vector<Arg>(const PointLossDesc&, int)> args) {
  Case<Op> c;
  for (DType t : float_dtypes())
    for (PointLoss k : {PointLoss::bce_logits, PointLoss::mse})
      for (int64_t n : {37, 1})
        for (Reduction r : {Reduction::none, Reduction::mean, Reduction::sum})
          for (int variant : {0, kPosWeight, kNoDiffTarget}) {
            if (variant == kPosWeight && k != PointLoss::bce_logits) continue;
            PointLossDesc d;
            d.kind = k;
            d.dtype = t;
            d.n = n;
            d.reduction = r;
            c.problems.push_back({d, variant, variant == kPosWeight ? "pos_weight" : variant ? "no-diff-target" : ""});
          }
  c.args = args;
  return c;
}

std::vector<Arg> point_inputs(const PointLossDesc& d, int variant) {
  return {in("src", d.dtype, d.n, uniform(-3, 3)),
          in("target", d.dtype, d.n, d.kind == PointLoss::bce_logits ? uniform(0, 1) : uniform(-1, 1)),
          variant & kPosWeight ? in("pos_weight", d.dtype, d.n, positive()) : none("pos_weight")};
}

}  // namespace

void add_loss(CaseMap& m) {
  add(m, case_over<kernel_op::cross_entropy_fwd>(class_problems(true), [](const ClassLossDesc& d) {
    const int64_t n = d.N * d.S;
    return std::vector<Arg>{in("src", d.dtype, d.N * d.C * d.S, uniform(-3, 3)), in("target", DType::int64, n, targets(d)),
                            out("dst", d.dtype, loss_elems(d.reduction, n)), out("save_lse", d.dtype, n)};
  }));
  add(m, case_over<kernel_op::cross_entropy_bwd>(class_problems(true), [](const ClassLossDesc& d) {
    const int64_t n = d.N * d.S;
    Gen lse = [d](Values& v, Rng&, const std::vector<Values>& before) {
      std::vector<int64_t> t(before[1].begin(), before[1].end());
      Values dst(size_t(loss_elems(d.reduction, d.N * d.S)));
      ref::cross_entropy_fwd<double>(as_float64(d), before[0].data(), t.data(), dst.data(), v.data());
    };
    return std::vector<Arg>{in("src", d.dtype, d.N * d.C * d.S, uniform(-3, 3)), in("target", DType::int64, n, targets(d)),
                            in("save_lse", d.dtype, n, lse), in("diff_dst", d.dtype, loss_elems(d.reduction, n)),
                            out("diff_src", d.dtype, d.N * d.C * d.S)};
  }));
  add(m, case_over<kernel_op::nll_fwd>(class_problems(false), [](const ClassLossDesc& d) {
    const int64_t n = d.N * d.S;
    return std::vector<Arg>{in("src", d.dtype, d.N * d.C * d.S, uniform(-3, 0)), in("target", DType::int64, n, targets(d)),
                            out("dst", d.dtype, loss_elems(d.reduction, n))};
  }));
  add(m, case_over<kernel_op::nll_bwd>(class_problems(false), [](const ClassLossDesc& d) {
    const int64_t n = d.N * d.S;
    return std::vector<Arg>{in("target", DType::int64, n, targets(d)), in("diff_dst", d.dtype, loss_elems(d.reduction, n)),
                            out("diff_src", d.dtype, d.N * d.C * d.S)};
  }));
  add(m, point_case<kernel_op::point_loss_fwd>([](const PointLossDesc& d, int variant) {
    std::vector<Arg> a = point_inputs(d, variant);
    a.push_back(out("dst", d.dtype, loss_elems(d.reduction, d.n)));
    return a;
  }));
  add(m, point_case<kernel_op::point_loss_bwd>([](const PointLossDesc& d, int variant) {
    std::vector<Arg> a = point_inputs(d, variant);
    a.push_back(in("diff_dst", d.dtype, loss_elems(d.reduction, d.n)));
    a.push_back(out("diff_src", d.dtype, d.n));
    a.push_back(variant & kNoDiffTarget ? none("diff_target") : out("diff_target", d.dtype, d.n));
    return a;
  }));
}

}  // namespace kiln::oracle
