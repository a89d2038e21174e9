// Seedable random numbers. A Generator is (seed, offset); each draw of n numbers advances the
// offset, and element i of a draw comes from Philox counter offset + i/4, so results are the same
// for every thread count and on every device.
#pragma once

#include <cstdint>

#include "engine/tensor.h"

namespace kiln {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0x6b696c6eULL) : seed_(seed) {}
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  void set_state(uint64_t seed, uint64_t offset) { seed_ = seed; offset_ = offset; }
  // Reserves counters for n numbers and returns the offset to use for them.
  uint64_t advance(uint64_t n) {
    uint64_t o = offset_;
    offset_ += (n + 3) / 4;
    return o;
  }

 private:
  uint64_t seed_;
  uint64_t offset_ = 0;
};

Generator& default_generator();
void manual_seed(uint64_t seed);

// In-place random fills (no autograd). `gen` defaults to the default generator.
Tensor& uniform_(Tensor& t, double lo = 0, double hi = 1, Generator* gen = nullptr);
Tensor& normal_(Tensor& t, double mean = 0, double std = 1, Generator* gen = nullptr);
Tensor& bernoulli_(Tensor& t, double p, Generator* gen = nullptr);

Tensor rand(const Shape& shape, TensorOptions opts = {}, Generator* gen = nullptr);
Tensor randn(const Shape& shape, TensorOptions opts = {}, Generator* gen = nullptr);

}  // namespace kiln
