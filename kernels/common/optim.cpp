#include "kernels/common/optim.h"

#include <sstream>

namespace kiln {

std::string SGDStepDesc::str() const {
  std::ostringstream os;
  os << "sgd " << dtype_name(dtype) << " n " << n << " lr " << lr << " momentum " << momentum << " dampening "
     << dampening << " wd " << weight_decay << (nesterov ? " nesterov" : "") << (first ? " first" : "");
  return os.str();
}

std::string AdamStepDesc::str() const {
  std::ostringstream os;
  os << (decoupled ? "adamw " : "adam ") << dtype_name(dtype) << " n " << n << " lr " << lr << " betas " << beta1
     << "," << beta2 << " eps " << eps << " wd " << weight_decay << " step " << step;
  return os.str();
}

std::string LarsStepDesc::str() const {
  std::ostringstream os;
  os << "lars " << dtype_name(dtype) << " n " << n << " lr " << lr << " local_lr " << local_lr << " momentum "
     << momentum << " wd " << weight_decay;
  return os.str();
}

std::string VecDesc::str() const {
  std::ostringstream os;
  os << "vec " << dtype_name(dtype) << " n " << n << " scale " << scale;
  return os.str();
}

}  // namespace kiln
