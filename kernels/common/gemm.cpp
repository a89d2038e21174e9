#include "kernels/common/gemm.h"

#include <sstream>

namespace kiln {

std::string GemmDesc::str() const {
  std::ostringstream os;
  os << "gemm " << dtype_name(dtype) << " " << (trans_a ? "T" : "N") << (trans_b ? "T" : "N") << " m" << m << "n" << n
     << "k" << k;
  if (batch > 1) os << " batch" << batch;
  return os.str();
}

}  // namespace kiln
