#include "kernels/common/loss.h"

#include <sstream>

namespace kiln {

const char* reduction_name(Reduction r) {
  switch (r) {
    case Reduction::none: return "none";
    case Reduction::mean: return "mean";
    case Reduction::sum: return "sum";
  }
  return "?";
}

std::string ClassLossDesc::str() const {
  std::ostringstream os;
  os << "class_loss " << dtype_name(dtype) << " [N " << N << ", C " << C << ", S " << S << "] reduction "
     << reduction_name(reduction) << " smoothing " << label_smoothing << " ignore " << ignore_index;
  return os.str();
}

std::string PointLossDesc::str() const {
  std::ostringstream os;
  os << (kind == PointLoss::mse ? "mse " : "bce_logits ") << dtype_name(dtype) << " n " << n << " reduction "
     << reduction_name(reduction);
  return os.str();
}

}  // namespace kiln
