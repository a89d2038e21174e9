#include "kernels/common/reduce.h"

#include <sstream>

namespace kiln {

std::string ReduceDesc::str() const {
  static const char* names[] = {"sum", "mean", "max", "min"};
  std::ostringstream os;
  os << names[int(op)] << " " << dtype_name(dtype) << " [" << outer << "," << reduce << "," << inner << "]";
  return os.str();
}

std::string IndexScatterDesc::str() const {
  std::ostringstream os;
  os << "index_scatter " << dtype_name(dtype) << " [" << outer << "," << reduce << "," << inner << "]";
  return os.str();
}

}  // namespace kiln
