// Inputs of the gradient and reference checks (tests/grad, the oneDNN kernel tests): leaves that
// want their gradient, and values with no ties. distinct_input is in testing.cpp.
#pragma once

#include <cstdint>

#include "engine/tensor.h"

namespace kiln::test {

// `t` marked as a leaf that wants its gradient (the inputs of gradcheck and against_ref).
inline Tensor req(Tensor t) { return t.requires_grad_(true); }

// float64 values of a shuffled ramp with spacing 2/numel over [-1, 1): all distinct, so max
// pooling has no near-ties, float32 and float64 pick the same element and finite differences
// never cross an argmax switch.
Tensor distinct_input(const Shape& shape, uint32_t seed);

}  // namespace kiln::test
