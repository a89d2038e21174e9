// Metrics (engine/metrics.h). Host loops over float64 copies: metrics run once per batch on
// small tensors, next to a forward and backward pass that cost far more.
// Test: ctest --test-dir build -R metrics
#include "engine/metrics.h"

#include <cmath>

namespace kiln::metrics {

int64_t topk_correct(const Tensor& logits, const Tensor& target, int k) {
  KILN_CHECK(logits.defined() && target.defined(), "topk_correct: undefined logits or target");
  KILN_CHECK(logits.dim() == 2, "topk_correct: logits must be [N, C], got ", shape_str(logits.sizes()));
  KILN_CHECK(target.dtype() == DType::int64 && target.dim() == 1 && target.size(0) == logits.size(0),
             "topk_correct: target must be int64 [", logits.size(0), "], got ", target.dtype(), " ",
             shape_str(target.sizes()));
  KILN_CHECK(k >= 1, "topk_correct: k must be >= 1, got ", k);
  KILN_CHECK(logits.is_floating_point(), "topk_correct: logits must be floating point, got ", logits.dtype());
  const int64_t N = logits.size(0), C = logits.size(1);
  Tensor x = logits.detach().to(Device()).to(DType::float64).contiguous();
  Tensor t = target.to(Device()).contiguous();
  const double* xp = x.data<double>();
  const int64_t* tp = t.data<int64_t>();
  int64_t correct = 0;
  for (int64_t n = 0; n < N; ++n) {
    const int64_t c = tp[n];
    KILN_CHECK(c >= 0 && c < C, "topk_correct: target class ", c, " at row ", n, " is out of range for ", C,
               " classes");
    const double* row = xp + n * C;
    const double v = row[c];
    if (std::isnan(v)) continue;
    int64_t rank = 0;  // classes ranked before the target
    for (int64_t j = 0; j < C && rank < k; ++j) rank += row[j] > v || (row[j] == v && j < c);
    correct += rank < k;
  }
  return correct;
}

SegScores segmentation_scores_from_counts(int64_t intersection, int64_t predicted, int64_t positive) {
  SegScores s;
  s.intersection = intersection;
  s.predicted = predicted;
  s.positive = positive;
  s.union_count = predicted + positive - intersection;
  s.iou = s.union_count > 0 ? double(intersection) / double(s.union_count) : 1.0;
  s.dice = predicted + positive > 0 ? 2.0 * double(intersection) / double(predicted + positive) : 1.0;
  return s;
}

SegScores binary_segmentation_scores(const Tensor& logits, const Tensor& mask, double threshold_logit) {
  KILN_CHECK(logits.defined() && mask.defined(), "binary_segmentation_scores: undefined logits or mask");
  KILN_CHECK(logits.sizes() == mask.sizes(), "binary_segmentation_scores: mask ", shape_str(mask.sizes()),
             " does not match logits ", shape_str(logits.sizes()));
  Tensor x = logits.detach().to(Device()).to(DType::float64).contiguous();
  Tensor m = mask.detach().to(Device()).to(DType::float64).contiguous();
  const double* xp = x.data<double>();
  const double* mp = m.data<double>();
  int64_t inter = 0, pred = 0, pos = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    KILN_CHECK(mp[i] == 0 || mp[i] == 1, "binary_segmentation_scores: mask value ", mp[i], " at flat position ", i,
               " is not 0 or 1");
    const bool p = xp[i] > threshold_logit, t = mp[i] == 1;
    inter += p && t;
    pred += p;
    pos += t;
  }
  return segmentation_scores_from_counts(inter, pred, pos);
}

void RunningAverage::add(double value, double weight) {
  KILN_CHECK(weight >= 0, "RunningAverage::add: weight must be >= 0, got ", weight);
  sum_ += value * weight;
  count_ += weight;
}

}  // namespace kiln::metrics
