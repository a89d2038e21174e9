// Dataset defaults. See dataset.h.
#include "io/data/dataset.h"

namespace kiln {

Dataset::~Dataset() = default;

std::string Dataset::source(int64_t) const { return {}; }

Shape Dataset::sample_shape() const {
  KILN_CHECK(size() > 0, "Dataset::sample_shape: the data set is empty");
  return get(0).input.sizes();
}

}  // namespace kiln
