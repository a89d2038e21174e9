// Dataset defaults, Subset and random_split. See dataset.h.
#include "io/data/dataset.h"

#include <cmath>
#include <numeric>

#include "io/data/dataloader.h"  // epoch_order: the seeded shuffle

namespace kiln {

Dataset::~Dataset() = default;

std::string Dataset::source(int64_t) const { return {}; }

Shape Dataset::sample_shape() const {
  KILN_CHECK(size() > 0, "Dataset::sample_shape: the data set is empty");
  return get(0).input.sizes();
}

Subset::Subset(std::shared_ptr<const Dataset> base, std::vector<int64_t> indices)
    : base_(std::move(base)), indices_(std::move(indices)) {
  KILN_CHECK(base_, "Subset: no data set");
  const int64_t n = base_->size();
  for (size_t i = 0; i < indices_.size(); ++i)
    KILN_CHECK(indices_[i] >= 0 && indices_[i] < n, "Subset: index ", indices_[i], " (position ", i,
               ") is out of range for a data set of ", n, " examples");
}

Example Subset::get(int64_t index) const {
  KILN_CHECK(index >= 0 && index < size(), "Subset::get: index ", index, " out of range [0, ", size(), ")");
  return base_->get(indices_[size_t(index)]);
}

std::string Subset::source(int64_t index) const {
  KILN_CHECK(index >= 0 && index < size(), "Subset::source: index ", index, " out of range [0, ", size(), ")");
  return base_->source(indices_[size_t(index)]);
}

std::vector<std::shared_ptr<Subset>> random_split(const std::shared_ptr<const Dataset>& data,
                                                  const std::vector<int64_t>& lengths, uint64_t seed) {
  KILN_CHECK(data, "random_split: no data set");
  KILN_CHECK(!lengths.empty(), "random_split: no lengths");
  int64_t total = 0;
  for (int64_t l : lengths) {
    KILN_CHECK(l >= 0, "random_split: negative length ", l);
    total += l;
  }
  KILN_CHECK(total == data->size(), "random_split: the lengths sum to ", total, " but the data set has ",
             data->size(), " examples");
  const std::vector<int64_t> order = epoch_order(data->size(), true, seed, 0, 0, 1);
  std::vector<std::shared_ptr<Subset>> out;
  int64_t at = 0;
  for (int64_t l : lengths) {
    out.push_back(std::make_shared<Subset>(data, std::vector<int64_t>(order.begin() + at, order.begin() + at + l)));
    at += l;
  }
  return out;
}

std::vector<std::shared_ptr<Subset>> random_split(const std::shared_ptr<const Dataset>& data,
                                                  const std::vector<double>& values, uint64_t seed) {
  KILN_CHECK(data, "random_split: no data set");
  KILN_CHECK(!values.empty(), "random_split: no lengths");
  const double sum = std::accumulate(values.begin(), values.end(), 0.0);
  std::vector<int64_t> lengths;
  if (std::fabs(sum - 1.0) < 1e-9 && sum <= 1.0 + 1e-9) {
    const int64_t n = data->size();
    int64_t given = 0;
    for (double f : values) {
      KILN_CHECK(f >= 0 && f <= 1, "random_split: fraction ", f, " is not in [0, 1]");
      lengths.push_back(int64_t(std::floor(f * double(n))));
      given += lengths.back();
    }
    for (size_t i = 0; given < n; i = (i + 1) % lengths.size(), ++given) ++lengths[i];
  } else {
    for (double v : values) {
      KILN_CHECK(v >= 0 && v == std::floor(v) && v < 9.0e15, "random_split: length ", v,
                 " is not a whole number (and the values do not sum to 1 as fractions)");
      lengths.push_back(int64_t(v));
    }
  }
  return random_split(data, lengths, seed);
}

}  // namespace kiln
