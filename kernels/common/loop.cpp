#include "kernels/common/loop.h"

#include <sstream>

namespace kiln {

std::string StridedLoop::str() const {
  std::ostringstream os;
  os << "loop[";
  for (int d = 0; d < ndim; ++d) os << (d ? "," : "") << sizes[d];
  os << "]";
  return os.str();
}

}  // namespace kiln
