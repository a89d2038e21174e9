#include "kernels/common/concat.h"

#include <sstream>

namespace kiln {

int64_t ConcatDesc::total() const {
  int64_t t = 0;
  for (int64_t s : sizes) t += s;
  return t;
}

std::string ConcatDesc::str() const {
  std::ostringstream os;
  os << "concat " << dtype_name(dtype) << " outer" << outer << " inner" << inner << " sizes";
  for (size_t i = 0; i < sizes.size(); ++i) os << (i ? "," : "") << sizes[i];
  return os.str();
}

std::string SumDesc::str() const {
  std::ostringstream os;
  os << "sum " << dtype_name(dtype) << " n" << n << " inputs" << inputs;
  return os.str();
}

}  // namespace kiln
