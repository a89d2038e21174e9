// Dataset: an indexed collection of (input, target) examples, the interface every reader in io/
// offers to training code (a DataLoader that batches and shuffles comes later).
//   ctest --test-dir build -R test_readers
#pragma once

#include <cstdint>
#include <string>

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

}  // namespace kiln
