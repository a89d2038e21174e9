// supports() predicates shared by several backend units.
#pragma once

#include "kernels/common/dtype.h"

namespace kiln {

// Takes float32 and float64 descriptors (`dtype` member), whatever else they say.
template <class D>
bool takes_float(const D& d) {
  return d.dtype == DType::float32 || d.dtype == DType::float64;
}

}  // namespace kiln
