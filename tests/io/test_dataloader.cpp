// DataLoader (io/data/dataloader.h), SyntheticDataset/TensorDataset and open_dataset_dir: order,
// seeded shuffle per (seed, epoch), identical batches for 0/1/3 workers, skip_batches, drop_last,
// rank sharding, error propagation, destruction mid-epoch, and real Fashion-MNIST.
//   ctest --test-dir build -R test_dataloader
#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "io/data/dataloader.h"
#include "io/data/datasets.h"
#include "io/data/synthetic.h"
#include "kernels/common/parallel.h"
#include "tests/support/testing.h"

namespace kiln {
namespace {

// Example i: input uint8 [1, 2, 3] filled with i % 256, target int64 i.
class IndexDataset : public Dataset {
 public:
  explicit IndexDataset(int64_t n, int64_t fail_at = -1, int sleep_us = 0) : n_(n), fail_at_(fail_at), sleep_us_(sleep_us) {}
  int64_t size() const override { return n_; }
  Example get(int64_t i) const override {
    ++gets;
    if (sleep_us_) std::this_thread::sleep_for(std::chrono::microseconds(sleep_us_));
    KILN_CHECK(i != fail_at_, "IndexDataset: broken sample");
    saw_serial = saw_serial || in_parallel_region();
    saw_team = saw_team || !in_parallel_region();
    Tensor x = full({1, 2, 3}, double(i % 256), uint8);
    Tensor y = full({}, double(i), int64);
    return {x, y};
  }
  static inline std::atomic<bool> saw_serial{false};
  static inline std::atomic<bool> saw_team{false};  // a get() whose ops could fork the op team
  static inline std::atomic<int64_t> gets{0};          // samples loaded, by every instance

 private:
  int64_t n_, fail_at_;
  int sleep_us_;
};

std::vector<std::vector<int64_t>> epoch_batches(DataLoader& dl, int64_t epoch, int64_t skip = 0) {
  dl.start_epoch(epoch, skip);
  std::vector<std::vector<int64_t>> out;
  Batch b;
  while (dl.next(b)) {
    std::vector<int64_t> ids = b.target.to_vector_of<int64_t>();
    REQUIRE(int64_t(ids.size()) == b.size);
    REQUIRE(ids == b.indices);
    out.push_back(ids);
  }
  return out;
}

TEST_CASE("unshuffled batches come in order; uint8 inputs stay uint8 without a transform") {
  auto data = std::make_shared<IndexDataset>(10);
  DataLoaderOptions o;
  o.batch_size = 4;
  o.shuffle = false;
  DataLoader dl(data, o);
  CHECK(dl.batches_per_epoch() == 3);
  dl.start_epoch(0);
  Batch b;
  REQUIRE(dl.next(b));
  CHECK(b.input.sizes() == Shape{4, 1, 2, 3});
  CHECK(b.input.dtype() == uint8);
  CHECK(b.target.sizes() == Shape{4});
  CHECK(b.input.at({3, 0, 1, 2}) == 3);
  auto all = epoch_batches(dl, 0);
  CHECK(all == std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}});
  CHECK_FALSE(dl.next(b));
  o.drop_last = true;
  DataLoader dl2(data, o);
  CHECK(dl2.batches_per_epoch() == 2);
  CHECK(epoch_batches(dl2, 0) == std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}});
}

TEST_CASE("shuffle is a permutation fixed by (seed, epoch); same batches for 0, 1 and 3 workers") {
  auto data = std::make_shared<IndexDataset>(103);
  DataLoaderOptions o;
  o.batch_size = 8;
  o.seed = 42;
  std::map<int, std::vector<std::vector<int64_t>>> e0, e1;
  for (int w : {0, 1, 3}) {
    o.workers = w;
    o.prefetch = w == 3 ? 2 : 4;
    DataLoader dl(data, o);
    e0[w] = epoch_batches(dl, 0);
    e1[w] = epoch_batches(dl, 1);
  }
  CHECK(e0[0] == e0[1]);
  CHECK(e0[0] == e0[3]);
  CHECK(e1[0] == e1[3]);
  CHECK(e0[0] != e1[0]);
  std::set<int64_t> seen;
  for (const auto& b : e0[0]) seen.insert(b.begin(), b.end());
  CHECK(seen.size() == 103);
  CHECK(*seen.rbegin() == 102);
  CHECK(e0[0].front() != std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7});
  o.seed = 43;
  DataLoader other(data, o);
  CHECK(epoch_batches(other, 0) != e0[0]);
}

TEST_CASE("skip_batches resumes mid-epoch with the same remaining batches; restart abandons prefetched work") {
  auto data = std::make_shared<IndexDataset>(50);
  DataLoaderOptions o;
  o.batch_size = 6;
  o.workers = 2;
  o.seed = 5;
  DataLoader dl(data, o);
  auto full_epoch = epoch_batches(dl, 3);
  auto tail = epoch_batches(dl, 3, 4);
  CHECK(tail == std::vector<std::vector<int64_t>>(full_epoch.begin() + 4, full_epoch.end()));
  CHECK(epoch_batches(dl, 3, dl.batches_per_epoch()).empty());
  dl.start_epoch(2);
  Batch b;
  REQUIRE(dl.next(b));  // leave the epoch half read
  CHECK(epoch_batches(dl, 3) == full_epoch);
}

TEST_CASE("rank sharding: equal batch counts, every sample covered, padding by wrapping") {
  int64_t n = 23;
  auto data = std::make_shared<IndexDataset>(n);
  for (int world : {1, 2, 4}) {
    std::multiset<int64_t> all;
    int64_t per_rank_batches = -1;
    for (int rank = 0; rank < world; ++rank) {
      DataLoaderOptions o;
      o.batch_size = 4;
      o.seed = 1;
      o.rank = rank;
      o.world_size = world;
      o.workers = rank % 2;
      DataLoader dl(data, o);
      auto batches = epoch_batches(dl, 7);
      if (per_rank_batches < 0) per_rank_batches = int64_t(batches.size());
      CHECK(int64_t(batches.size()) == per_rank_batches);
      CHECK(per_rank_batches == dl.batches_per_epoch());
      for (const auto& b : batches) all.insert(b.begin(), b.end());
    }
    int64_t total = (n + world - 1) / world * world;
    CHECK(int64_t(all.size()) == total);
    std::set<int64_t> distinct(all.begin(), all.end());
    CHECK(int64_t(distinct.size()) == n);  // exactly once, plus total - n wrapped repeats
  }
  CHECK_THROWS_KILN(DataLoader(data, DataLoaderOptions{4, true, false, 0, 4, 0, 2, 2}), "rank 2 not in [0, world_size 2)");
}

TEST_CASE("a failing sample is rethrown by next() in order, naming the sample") {
  auto data = std::make_shared<IndexDataset>(40, 13);
  for (int w : {0, 2}) {
    DataLoaderOptions o;
    o.batch_size = 4;
    o.shuffle = false;
    o.workers = w;
    DataLoader dl(data, o);
    dl.start_epoch(0);
    Batch b;
    for (int i = 0; i < 3; ++i) CHECK(dl.next(b));
    CHECK_THROWS_KILN(dl.next(b), "sample 13 (batch 3, epoch 0): IndexDataset: broken sample");
    CHECK(dl.next(b));  // the loader carries on after the failed batch
    CHECK(b.indices.front() == 16);
  }
  Batch b;
  DataLoader idle(data, DataLoaderOptions{});
  CHECK_THROWS_KILN(idle.next(b), "call start_epoch");
}

TEST_CASE("destroying a loader mid-epoch joins its workers without hanging; workers run ops serially") {
  auto slow = std::make_shared<IndexDataset>(1000, -1, 2000);
  IndexDataset::saw_serial = false;
  IndexDataset::gets = 0;
  {
    DataLoaderOptions o;
    o.batch_size = 4;
    o.workers = 3;
    o.prefetch = 8;
    DataLoader dl(slow, o);
    dl.start_epoch(0);
    Batch b;
    REQUIRE(dl.next(b));
  }
  // The workers stopped at the destructor: what was loaded is the batch taken, the prefetched
  // batches and at most one batch in the hands of each worker, not the epoch's 1000 samples (a
  // destructor that waited for the epoch would load them all; one that hung, CTest's timeout).
  CHECK(IndexDataset::gets.load() <= 4 * (1 + 8 + 3));
  CHECK(IndexDataset::saw_serial.load());  // in_parallel_region() true inside loader workers
  DataLoader never_started(slow, DataLoaderOptions{});
}

TEST_CASE("with no workers the calling thread loads serially too, and runs ops on the team after") {
  auto data = std::make_shared<IndexDataset>(10);
  IndexDataset::saw_team = false;
  DataLoaderOptions o;
  o.batch_size = 4;
  o.workers = 0;
  DataLoader dl(data, o);
  CHECK(epoch_batches(dl, 0).size() == 3);
  CHECK_FALSE(IndexDataset::saw_team.load());
  CHECK_FALSE(in_parallel_region());  // the scope ends with the batch
}

TEST_CASE("transforms get the same per-sample stream whatever the worker count") {
  auto data = std::make_shared<SyntheticDataset>(Shape{3, 12, 12}, 5, 37, 9);
  auto t = compose({random_crop(8, 8, 2), random_horizontal_flip()});
  std::vector<double> ref;
  for (int w : {0, 3}) {
    DataLoaderOptions o;
    o.batch_size = 5;
    o.workers = w;
    o.seed = 77;
    DataLoader dl(data, o, t);
    dl.start_epoch(2);
    Batch b;
    std::vector<double> vals;
    while (dl.next(b)) {
      CHECK(b.input.sizes()[1] == 3);
      CHECK(b.input.sizes()[2] == 8);
      for (double v : b.input.to_vector()) vals.push_back(v);
    }
    if (ref.empty()) ref = vals;
    else CHECK(vals == ref);
  }
}

TEST_CASE("a target transform sees the same draws as the input's: image and mask flip together") {
  // Input and target equal; with matching random steps they must stay equal after transforms.
  Tensor x = arange(6 * 2 * 5 * 5, float32).reshape({6, 2, 5, 5});
  auto data = std::make_shared<TensorDataset>(x, x.clone());
  auto geo = compose({random_crop(4, 4, 1), random_horizontal_flip()});
  DataLoaderOptions o;
  o.batch_size = 3;
  o.seed = 11;
  DataLoader dl(data, o, geo, geo);
  dl.start_epoch(4);
  Batch b;
  int64_t n = 0;
  while (dl.next(b)) {
    CHECK(b.input.sizes() == Shape{3, 2, 4, 4});
    CHECK(b.input.to_vector() == b.target.to_vector());
    n += b.size;
  }
  CHECK(n == 6);
}

TEST_CASE("SyntheticDataset and TensorDataset") {
  SyntheticDataset s({2, 3, 3}, 4, 10, 1);
  Example a = s.get(3), b = s.get(3), c = s.get(4);
  CHECK(a.input.to_vector() == b.input.to_vector());
  CHECK(a.input.to_vector() != c.input.to_vector());
  for (double v : a.input.to_vector()) CHECK((v >= 0 && v < 1));
  std::set<int64_t> labels;
  for (int64_t i = 0; i < 10; ++i) labels.insert(int64_t(s.get(i).target.item()));
  CHECK(*labels.rbegin() < 4);
  CHECK(labels.size() > 1);
  CHECK_THROWS_KILN(s.get(10), "out of range");
  TensorDataset t(arange(12, float32).reshape({4, 3}), arange(4, int64));
  CHECK(t.size() == 4);
  CHECK(t.sample_shape() == Shape{3});
  CHECK(t.get(2).input.to_vector() == std::vector<double>{6, 7, 8});
  CHECK(t.get(2).target.item() == 2);
  CHECK_THROWS_KILN(TensorDataset(zeros({4, 3}), zeros({5})), "same first dim");
}

TEST_CASE("Subset and random_split: disjoint, seeded, checked") {
  auto data = std::make_shared<TensorDataset>(arange(20, float32).reshape({10, 2}), arange(10, int64));
  Subset sub(data, {7, 2, 7});
  CHECK(sub.size() == 3);
  CHECK(sub.get(0).target.item() == 7);
  CHECK(sub.get(1).input.to_vector() == std::vector<double>{4, 5});
  CHECK(sub.sample_shape() == Shape{2});
  CHECK_THROWS_KILN(Subset(data, {3, 10}), "Subset: index 10 (position 1) is out of range for a data set of 10 examples");
  CHECK_THROWS_KILN(sub.get(3), "Subset::get: index 3 out of range [0, 3)");

  auto parts = random_split(data, {7, 3}, 5);
  REQUIRE(parts.size() == 2);
  CHECK(parts[0]->size() == 7);
  CHECK(parts[1]->size() == 3);
  std::set<int64_t> seen;
  for (auto& p : parts)
    for (int64_t i : p->indices()) CHECK(seen.insert(i).second);
  CHECK(seen.size() == 10);
  CHECK(random_split(data, {7, 3}, 5)[1]->indices() == parts[1]->indices());  // the seed fixes it
  CHECK(random_split(data, {7, 3}, 6)[0]->indices() != parts[0]->indices());
  // Fractions: floor(0.55 * 10) = 5, floor(0.45 * 10) = 4, the one left over to the first.
  auto f = random_split(data, {0.55, 0.45}, 1);
  CHECK(f[0]->size() == 6);
  CHECK(f[1]->size() == 4);
  std::vector<int64_t> lengths = {5, 5};
  CHECK(random_split(data, lengths)[0]->size() == 5);
  CHECK_THROWS_KILN(random_split(data, {7, 2}), "random_split: the lengths sum to 9 but the data set has 10 examples");
  CHECK_THROWS_KILN(random_split(data, {2.5, 7.5}), "random_split: length 2.5 is not a whole number");
}

TEST_CASE("a range-for runs one epoch per loop, as LibTorch's loader") {
  auto data = std::make_shared<TensorDataset>(arange(10, float32).reshape({10, 1}), arange(10, int64));
  DataLoaderOptions o;
  o.batch_size = 4;
  o.shuffle = true;
  o.seed = 3;
  o.workers = 1;
  DataLoader loader(data, o);
  std::vector<std::vector<int64_t>> epochs;
  for (int e = 0; e < 2; ++e) {
    std::vector<int64_t> order;
    int batches = 0;
    for (Batch& b : loader) {
      ++batches;
      order.insert(order.end(), b.indices.begin(), b.indices.end());
    }
    CHECK(batches == 3);
    CHECK(loader.epoch() == e);
    epochs.push_back(order);
  }
  CHECK(epochs[0] == epoch_order(10, true, 3, 0, 0, 1));
  CHECK(epochs[1] == epoch_order(10, true, 3, 1, 0, 1));
  // start_epoch() then a range-for: that epoch, its skip honoured (a resume).
  loader.start_epoch(5, 2);
  int left = 0;
  for (Batch& b : loader) left += int(b.size);
  CHECK(left == 2);
  CHECK(loader.epoch() == 5);
}

TEST_CASE("open_dataset_dir: synthetic spec, unknown paths") {
  Splits s = open_dataset_dir("synthetic:3x8x8:10:50");
  CHECK(s.name == "synthetic");
  CHECK(s.train->size() == 50);
  CHECK(s.test->size() == 5);
  CHECK(s.sample_shape == Shape{3, 8, 8});
  CHECK(s.classes == 10);
  CHECK_THROWS_KILN(open_dataset_dir("synthetic:3x8:ten:50"), "bad synthetic spec");
  CHECK_THROWS_KILN(open_dataset_dir("synthetic:3x8x8:10:50:easy"), "bad synthetic spec");
  // :learnable: the same noise plus +1 on the class's band of rows (10 rows, 5 classes: 2 each).
  Splits plain = open_dataset_dir("synthetic:2x10x4:5:20"), easy = open_dataset_dir("synthetic:2x10x4:5:20:learnable");
  for (int64_t i = 0; i < 20; ++i) {
    Example a = plain.train->get(i), b = easy.train->get(i);
    const int64_t c = int64_t(b.target.item());
    CHECK(a.target.item() == c);
    std::vector<double> va = a.input.to_vector(), vb = b.input.to_vector();
    for (size_t k = 0; k < va.size(); ++k) {
      const int64_t row = int64_t(k / 4) % 10;
      CHECK(vb[k] - va[k] == doctest::Approx(row / 2 == c ? 1.0 : 0.0));
    }
  }
  CHECK_THROWS_KILN(open_dataset_dir("/no/such/dir"), "does not exist");
  CHECK_THROWS_KILN(open_dataset_dir(KILN_SOURCE_DIR "/io"), "looked for IDX files");
}

TEST_CASE("real Fashion-MNIST through open_dataset_dir and the loader") {
  const char* dir = "/usr/share/datasets/fashion-mnist";
  Splits s = open_dataset_dir(dir);
  CHECK(s.name == "fashion-mnist");
  CHECK(s.train->size() == 60000);
  CHECK(s.test->size() == 10000);
  CHECK(s.sample_shape == Shape{1, 28, 28});
  CHECK(s.classes == 10);
  DataLoaderOptions o;
  o.batch_size = 128;
  o.workers = 2;
  DataLoader dl(s.train, o, s.default_transform(true));
  CHECK(dl.batches_per_epoch() == 469);
  dl.start_epoch(0);
  Batch b;
  double sum = 0;
  int64_t n = 0, counts[10] = {0};
  for (int i = 0; i < 40 && dl.next(b); ++i) {
    CHECK(b.input.sizes() == Shape{128, 1, 28, 28});
    CHECK(b.input.dtype() == float32);
    for (double v : b.input.to_vector()) sum += v;
    n += b.input.numel();
    for (int64_t y : b.target.to_vector_of<int64_t>()) counts[y]++;
  }
  CHECK(std::abs(sum / double(n)) < 0.05);  // normalised: mean about 0
  for (int64_t c : counts) CHECK(c > 300);  // shuffled: every class present
}

}  // namespace
}  // namespace kiln
