// Gradient checking for users' own ops and Functions (torch.autograd.gradcheck): f's analytic
// gradients against central finite differences, in float64.
//   std::string err = autograd::gradcheck([](const std::vector<Tensor>& in) { return MyFn::apply(in[0]); },
//                                         {x.to(DType::float64).requires_grad_()});
//   if (!err.empty()) throw std::runtime_error(err);
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace kiln::autograd {

struct GradcheckOptions {
  double eps = 1e-6;   // the finite-difference step
  double rtol = 1e-5;  // |analytic - numeric| <= atol + rtol * |numeric| for every element
  double atol = 1e-6;
  uint64_t seed = 7;   // of the random weights w: the checked scalar is sum(f(inputs) * w)
  // The backend list f runs under, strictly (an op without a kernel there is an error, not a
  // fallback); empty: the current preference.
  std::string backend;
};

// f must be deterministic and return one floating-point tensor. The inputs that require grad
// (floating point) are copied to contiguous float64 and checked element by element; the others
// are passed as they are. Returns "" when every element agrees, else the first disagreement
// (input, element, analytic and numeric values). A NaN or infinity fails.
std::string gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f, const std::vector<Tensor>& inputs,
                      const GradcheckOptions& options = {});

}  // namespace kiln::autograd
