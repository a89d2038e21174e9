#include "kernels/common/norm.h"

#include <sstream>

namespace kiln {

std::string BatchNormDesc::str() const {
  std::ostringstream os;
  os << "batch_norm " << dtype_name(dtype) << " [N " << N << ", C " << C << ", S " << S << "] "
     << (nhwc ? "nhwc " : "") << (relu ? "relu " : "") << (training ? "train" : "eval") << " eps " << eps << " momentum " << momentum;
  return os.str();
}

std::string DropoutDesc::str() const {
  std::ostringstream os;
  os << "dropout " << dtype_name(dtype) << " n " << n << " p " << p;
  return os.str();
}

std::string SoftmaxDesc::str() const {
  std::ostringstream os;
  os << (log ? "log_softmax " : "softmax ") << dtype_name(dtype) << " [" << outer << "," << dim << "," << inner
     << "]";
  return os.str();
}

}  // namespace kiln
