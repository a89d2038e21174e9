// Training metrics computed on the host: top-k accuracy counts, binary segmentation IoU / Dice,
// and a weighted running average for epoch means.
// Test: ctest --test-dir build -R metrics
#pragma once

#include <cstdint>

#include "engine/tensor.h"

namespace kiln::metrics {

// Rows of logits [N, C] whose target (int64 [N], in [0, C)) is among the k largest; ties rank
// the lower class index first (a stable descending sort). k is clamped to C. kiln::Error on bad
// shapes, dtypes or class indices.
int64_t topk_correct(const Tensor& logits, const Tensor& target, int k);

// Foreground class of a binary mask: prediction = logits > threshold_logit (0: probability 0.5),
// counts summed over every element of the batch, then IoU = |P & M| / |P | M| and
// Dice = 2 |P & M| / (|P| + |M|); both are 1 when P and M are empty. The counts are kept so
// that scores over a whole epoch can be formed from summed counts.
struct SegScores {
  double iou = 0, dice = 0;
  int64_t intersection = 0, union_count = 0, predicted = 0, positive = 0;
};
SegScores binary_segmentation_scores(const Tensor& logits, const Tensor& mask, double threshold_logit = 0);
// Scores from summed counts (several batches).
SegScores segmentation_scores_from_counts(int64_t intersection, int64_t predicted, int64_t positive);

// Weighted mean of added values: add(batch_loss, batch_size) per batch gives the epoch mean.
class RunningAverage {
 public:
  void add(double value, double weight = 1);
  double mean() const { return count_ > 0 ? sum_ / count_ : 0.0; }  // 0 before any add
  double sum() const { return sum_; }
  double count() const { return count_; }
  void reset() { sum_ = 0, count_ = 0; }

 private:
  double sum_ = 0, count_ = 0;
};

}  // namespace kiln::metrics
