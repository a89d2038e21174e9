// In-memory data sets. See synthetic.h.
#include "io/data/synthetic.h"

#include <algorithm>

#include "engine/checked_size.h"
#include "kernels/common/philox.h"

namespace kiln {

SyntheticDataset::SyntheticDataset(Shape sample, int64_t classes, int64_t size, uint64_t seed, bool learnable)
    : sample_(std::move(sample)), classes_(classes), size_(size), seed_(seed), learnable_(learnable) {
  KILN_CHECK(classes > 0 && size > 0, "SyntheticDataset: classes ", classes, " and size ", size, " must be positive");
  for (int64_t d : sample_) KILN_CHECK(d > 0, "SyntheticDataset: bad sample shape ", shape_str(sample_));
  // Each get() allocates one float32 sample: its size must not wrap (engine/checked_size.h).
  checked_nbytes(sample_, sizeof(float), "SyntheticDataset: sample shape");
}

Example SyntheticDataset::get(int64_t index) const {
  KILN_CHECK(index >= 0 && index < size_, "SyntheticDataset::get: index ", index, " out of range [0, ", size_, ")");
  Tensor x = empty(sample_, float32);
  float* d = x.data<float>();
  int64_t n = x.numel();
  // Stream `index`: counters index << 32 upwards, label from the last lane of the first block.
  uint64_t base = uint64_t(index) << 32;
  // philox_uniform(seed_, base + 1, i) for every i, one Philox block per 4 values.
  for (int64_t i = 0; i < n; i += 4) {
    Philox4x32 r = philox4x32(seed_, base + 1 + uint64_t(i) / 4);
    for (int64_t k = 0; k < 4 && i + k < n; ++k) d[i + k] = uint_to_unit_float(r.v[k]);
  }
  Tensor y = empty(Shape{}, int64);
  const int64_t label = int64_t(philox4x32(seed_, base).v[0] % uint64_t(classes_));
  *y.data<int64_t>() = label;
  if (learnable_ && sample_.size() >= 2) {
    // [.., H, W]: the class's band of rows, in every leading plane.
    const int64_t H = sample_[sample_.size() - 2], W = sample_.back();
    const int64_t r0 = label * H / classes_, r1 = std::max(r0 + 1, (label + 1) * H / classes_);
    for (int64_t p = 0; p < n / (H * W); ++p)
      for (int64_t r = r0; r < std::min(r1, H); ++r)
        for (int64_t c = 0; c < W; ++c) d[(p * H + r) * W + c] += 1.0f;
  }
  return {x, y};
}

TensorDataset::TensorDataset(Tensor inputs, Tensor targets) : inputs_(std::move(inputs)), targets_(std::move(targets)) {
  KILN_CHECK(inputs_.defined() && targets_.defined(), "TensorDataset: undefined inputs or targets");
  KILN_CHECK(inputs_.dim() >= 1 && targets_.dim() >= 1 && inputs_.size(0) == targets_.size(0),
             "TensorDataset: inputs ", shape_str(inputs_.sizes()), " and targets ", shape_str(targets_.sizes()),
             " need the same first dim");
}

Example TensorDataset::get(int64_t index) const {
  KILN_CHECK(index >= 0 && index < size(), "TensorDataset::get: index ", index, " out of range [0, ", size(), ")");
  return {inputs_.select(0, index), targets_.select(0, index)};
}

Shape TensorDataset::sample_shape() const { return Shape(inputs_.sizes().begin() + 1, inputs_.sizes().end()); }

}  // namespace kiln
