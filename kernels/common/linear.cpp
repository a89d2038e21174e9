#include "kernels/common/linear.h"

#include <sstream>

namespace kiln {

std::string LinearDesc::str() const {
  std::ostringstream os;
  os << "linear " << dtype_name(dtype) << " n" << n << "ic" << ic << "oc" << oc << (has_bias ? " bias" : "");
  return os.str();
}

}  // namespace kiln
