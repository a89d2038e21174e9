// Metrics: top-k counts (ties, k >= C), binary segmentation IoU/Dice, running averages, errors.
//   ctest --test-dir build -R engine.test_metrics
#include "tests/support/testing.h"

#include "engine/metrics.h"

using namespace kiln;
using namespace kiln::metrics;

TEST_CASE("topk_correct counts rows whose target is among the k largest") {
  Tensor logits = from_vector(std::vector<double>{0.1, 0.5, 0.2, 0.9,   // order 3,1,2,0
                                                  2.0, 1.0, 0.0, -1.0,  // order 0,1,2,3
                                                  0.3, 0.3, 0.3, 0.3,   // all tied
                                                  -5, 4, 3, 2},         // order 1,2,3,0
                              {4, 4}, DType::float32);
  Tensor target = from_vector(std::vector<double>{1, 0, 2, 0}, {4}, DType::int64);
  CHECK(topk_correct(logits, target, 1) == 1);  // row 1
  CHECK(topk_correct(logits, target, 2) == 2);  // + row 0
  CHECK(topk_correct(logits, target, 3) == 3);  // + row 2 (ties: class 2 ranks third)
  CHECK(topk_correct(logits, target, 4) == 4);
  CHECK(topk_correct(logits, target, 10) == 4);
  CHECK_THROWS_KILN(topk_correct(logits, from_vector(std::vector<double>{1, 0, 4, 0}, {4}, DType::int64), 1),
                    "target class 4 at row 2 is out of range for 4 classes");
  CHECK_THROWS_KILN(topk_correct(logits, target.to(DType::float32), 1), "target must be int64 [4]");
  CHECK_THROWS_KILN(topk_correct(logits.flatten(), target, 1), "logits must be [N, C]");
  CHECK_THROWS_KILN(topk_correct(logits, target, 0), "k must be >= 1");
}

TEST_CASE("binary segmentation IoU and Dice sum over the batch") {
  // 2 images of 2x3: predictions (logit > 0) and masks.
  Tensor logits = from_vector(std::vector<double>{1, -1, 2, -3, 0.5, -0.1,  //
                                                  -1, -1, 3, 3, -2, 0},
                              {2, 1, 2, 3});
  Tensor mask = from_vector(std::vector<double>{1, 0, 0, 0, 1, 1,  //
                                                0, 0, 1, 0, 1, 0},
                            {2, 1, 2, 3});
  // P = {0, 2, 4, 8, 9}, M = {0, 4, 5, 8, 10}: |P & M| = 3, |P| = 5, |M| = 5, |P | M| = 7.
  SegScores s = binary_segmentation_scores(logits, mask);
  CHECK(s.intersection == 3);
  CHECK(s.union_count == 7);
  CHECK(s.iou == doctest::Approx(3.0 / 7));
  CHECK(s.dice == doctest::Approx(0.6));
  // A threshold of logit 1.5 keeps predictions {2, 8, 9}: & M = {8}.
  SegScores t = binary_segmentation_scores(logits, mask, 1.5);
  CHECK(t.iou == doctest::Approx(1.0 / 7));
  CHECK(t.dice == doctest::Approx(2.0 / 8));
  SegScores empty = binary_segmentation_scores(full({4}, -1.0), zeros({4}));
  CHECK(empty.iou == 1);
  CHECK(empty.dice == 1);
  CHECK(segmentation_scores_from_counts(3, 5, 5).iou == doctest::Approx(3.0 / 7));
  CHECK_THROWS_KILN(binary_segmentation_scores(logits, zeros({2, 6})), "mask [2, 6] does not match logits [2, 1, 2, 3]");
  CHECK_THROWS_KILN(binary_segmentation_scores(ones({2}), full({2}, 0.5)), "mask value 0.5 at flat position 0");
}

TEST_CASE("RunningAverage weights values") {
  RunningAverage a;
  CHECK(a.mean() == 0);
  a.add(2.0, 3);  // batch of 3 with mean loss 2
  a.add(4.0, 1);
  CHECK(a.sum() == 10);
  CHECK(a.count() == 4);
  CHECK(a.mean() == 2.5);
  a.add(1.0);
  CHECK(a.mean() == doctest::Approx(11.0 / 5));
  a.reset();
  CHECK(a.count() == 0);
  CHECK(a.mean() == 0);
  CHECK_THROWS_KILN(a.add(1.0, -1), "weight must be >= 0");
}
