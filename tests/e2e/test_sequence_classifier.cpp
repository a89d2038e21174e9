// Classifying sequences of different lengths with a GRU: generated sequences of 4 to 20 steps
// (three classes: a slow sine, a fast sine, a noisy ramp), padded to 20 with values that must not
// matter, a bidirectional GRU run through forward_packed and a linear layer on both directions'
// final states. Adam trains it on 384 sequences; on 192 held-out ones the accuracy must reach 90 %
// (chance is 33 %), and a prediction must not change when the padding past a sequence's end does.
//   ctest --test-dir build -R e2e.test_sequence_classifier
#include "tests/support/testing.h"

#include <cmath>

#include "engine/ops/loss.h"
#include "engine/ops/reduce.h"
#include "engine/ops/shape.h"
#include "engine/optim.h"
#include "layers/linear.h"
#include "layers/rnn.h"

using namespace kiln;

namespace {

constexpr int64_t kMaxLen = 20, kFeatures = 2, kClasses = 3;

struct Batch {
  Tensor x, lengths, labels;
};

// n sequences [n, kMaxLen, 2]: class c, length in [4, 20], padding filled with `pad`.
Batch make_batch(int64_t n, uint64_t seed, double pad) {
  Generator g(seed);
  const Tensor u = rand({n, 3 + kMaxLen * kFeatures}, {}, &g);
  const float* r = u.data<float>();
  std::vector<double> x(size_t(n * kMaxLen * kFeatures)), len(static_cast<size_t>(n)), lab(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const float* ri = r + i * (3 + kMaxLen * kFeatures);
    const int64_t c = int64_t(ri[0] * kClasses) % kClasses, L = 4 + int64_t(ri[1] * 17) % 17;
    const double phase = 6.283 * ri[2];
    lab[size_t(i)] = double(c);
    len[size_t(i)] = double(L);
    for (int64_t t = 0; t < kMaxLen; ++t)
      for (int64_t f = 0; f < kFeatures; ++f) {
        const double noise = 0.3 * (ri[3 + t * kFeatures + f] - 0.5);
        double v;
        if (c == 0) v = std::sin(0.4 * double(t) + phase + f);
        else if (c == 1) v = std::sin(2.2 * double(t) + phase + f);
        else v = 0.15 * double(t) - 1.0 + 3 * noise;
        x[size_t((i * kMaxLen + t) * kFeatures + f)] = t < L ? v + noise : pad;
      }
  }
  return {from_vector(x, {n, kMaxLen, kFeatures}), from_vector(len, {n}, DType::int64),
          from_vector(lab, {n}, DType::int64)};
}

class Classifier : public Module {
 public:
  Classifier() {
    RNNOptions o(kFeatures, 16);
    o.batch_first = true;
    o.bidirectional = true;
    gru_ = register_module("gru", std::make_shared<GRU>(o));
    fc_ = register_module("fc", std::make_shared<Linear>(32, kClasses));
  }
  Tensor forward(const Tensor& x, const Tensor& lengths) {
    const RnnOutput r = gru_->forward_packed(x, lengths);
    // h_n [2, N, 16]: each direction's state after the sequence's own last step.
    return (*fc_)(ops::cat({r.h_n.select(0, 0), r.h_n.select(0, 1)}, 1));
  }
  std::string repr() const override { return "Classifier"; }

 private:
  std::shared_ptr<GRU> gru_;
  std::shared_ptr<Linear> fc_;
};

double accuracy(const Tensor& logits, const Tensor& labels) {
  const std::vector<double> p = ops::argmax(logits, 1).to_vector(), y = labels.to_vector();
  double hit = 0;
  for (size_t i = 0; i < p.size(); ++i) hit += p[i] == y[i] ? 1 : 0;
  return hit / double(p.size());
}

}  // namespace

TEST_CASE("a bidirectional GRU classifies sequences of different lengths") {
  manual_seed(11);
  Classifier net;
  optim::AdamOptions ao;
  ao.lr = 0.02;
  auto opt = optim::adam(net.named_parameters(), ao);
  const Batch test = make_batch(192, 99, 0.0);
  for (int epoch = 0; epoch < 12; ++epoch)
    for (uint64_t b = 0; b < 6; ++b) {
      const Batch train = make_batch(64, 1000 + b, 0.0);
      opt->zero_grad();
      Tensor loss = ops::cross_entropy(net.forward(train.x, train.lengths), train.labels);
      loss.backward();
      opt->step();
    }
  NoGradGuard ng;
  net.eval();
  const Tensor logits = net.forward(test.x, test.lengths);
  const double acc = accuracy(logits, test.labels);
  MESSAGE("held-out accuracy " << acc);
  CHECK(acc >= 0.9);
  // The padding is never read: other values past each end give the same logits.
  const Batch padded = make_batch(192, 99, 7.5);
  CHECK_CLOSE(net.forward(padded.x, padded.lengths), logits, 0, 0);
}
