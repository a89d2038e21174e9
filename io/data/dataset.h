// Dataset: an indexed collection of (input, target) examples, the interface every reader in io/
// offers to training code (a DataLoader that batches and shuffles comes later).
//   ctest --test-dir build -R test_readers
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace kiln {

struct Example {
  Tensor input;
  Tensor target;
};

class Dataset {
 public:
  virtual ~Dataset();
  virtual int64_t size() const = 0;
  // index in [0, size()); out of range throws kiln::Error.
  virtual Example get(int64_t index) const = 0;
  // Shape of one input; the default reads example 0.
  virtual Shape sample_shape() const;
  // Where example `index` comes from, for error messages (an image's path); empty (the default)
  // when the index says all there is.
  virtual std::string source(int64_t index) const;
};

// The examples of `base` at `indices`, in that order (torch.utils.data.Subset). Every index is
// checked against base->size() when the subset is made.
class Subset : public Dataset {
 public:
  Subset(std::shared_ptr<const Dataset> base, std::vector<int64_t> indices);
  int64_t size() const override { return int64_t(indices_.size()); }
  Example get(int64_t index) const override;
  Shape sample_shape() const override { return base_->sample_shape(); }
  std::string source(int64_t index) const override;
  const std::vector<int64_t>& indices() const { return indices_; }
  const Dataset& base() const { return *base_; }

 private:
  std::shared_ptr<const Dataset> base_;
  std::vector<int64_t> indices_;
};

// Disjoint subsets of the given lengths from a seeded shuffle of `data` (torch's random_split
// with a manual_seed generator): the same seed gives the same split. Lengths must sum to
// data->size(). As in PyTorch, values summing to 1 are fractions: floor(f * size) each, the
// remainder going one by one to the first subsets.
//   auto parts = random_split(data, {0.8, 0.2}, 42);   // or {48000, 12000}
std::vector<std::shared_ptr<Subset>> random_split(const std::shared_ptr<const Dataset>& data,
                                                  const std::vector<int64_t>& lengths, uint64_t seed = 0);
std::vector<std::shared_ptr<Subset>> random_split(const std::shared_ptr<const Dataset>& data,
                                                  const std::vector<double>& lengths_or_fractions, uint64_t seed = 0);
// A braced list ({0.8, 0.2} or {8, 2}) picks this one.
inline std::vector<std::shared_ptr<Subset>> random_split(const std::shared_ptr<const Dataset>& data,
                                                         std::initializer_list<double> lengths_or_fractions,
                                                         uint64_t seed = 0) {
  return random_split(data, std::vector<double>(lengths_or_fractions), seed);
}

}  // namespace kiln
