#include "layers/loss.h"

#include <sstream>

namespace kiln {

CrossEntropyLoss::CrossEntropyLoss(Reduction reduction, double label_smoothing, int64_t ignore_index)
    : reduction_(reduction), label_smoothing_(label_smoothing), ignore_index_(ignore_index) {
  KILN_CHECK(label_smoothing >= 0 && label_smoothing <= 1, "CrossEntropyLoss: label_smoothing must be in [0, 1], got ",
             label_smoothing);
}

Tensor CrossEntropyLoss::operator()(const Tensor& input, const Tensor& target) const {
  return ops::cross_entropy(input, target, reduction_, label_smoothing_, ignore_index_);
}

std::string CrossEntropyLoss::repr() const {
  std::ostringstream os;
  os << "CrossEntropyLoss(reduction=" << reduction_name(reduction_) << ", label_smoothing=" << label_smoothing_
     << ", ignore_index=" << ignore_index_ << ")";
  return os.str();
}

Tensor NLLLoss::operator()(const Tensor& input, const Tensor& target) const {
  return ops::nll_loss(input, target, reduction_, ignore_index_);
}

std::string NLLLoss::repr() const {
  return std::string("NLLLoss(reduction=") + reduction_name(reduction_) + ", ignore_index=" +
         std::to_string(ignore_index_) + ")";
}

Tensor BCEWithLogitsLoss::operator()(const Tensor& input, const Tensor& target) const {
  return ops::binary_cross_entropy_with_logits(input, target, reduction_, pos_weight_);
}

std::string BCEWithLogitsLoss::repr() const {
  return std::string("BCEWithLogitsLoss(reduction=") + reduction_name(reduction_) +
         (pos_weight_.defined() ? ", pos_weight=" + shape_str(pos_weight_.sizes()) : "") + ")";
}

Tensor MSELoss::operator()(const Tensor& input, const Tensor& target) const {
  return ops::mse_loss(input, target, reduction_);
}

std::string MSELoss::repr() const { return std::string("MSELoss(reduction=") + reduction_name(reduction_) + ")"; }

}  // namespace kiln
