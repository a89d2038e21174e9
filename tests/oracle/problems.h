// Helpers of the problem tables (tests/oracle/problems_*.cpp): strided loops from short specs,
// and the dtypes problems are listed in.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "tests/oracle/oracle.h"

namespace kiln::oracle {

// The dtypes every op with float32/float64 candidates is checked in; `storage` adds the 16-bit
// types some candidates take (their compute is float32).
inline const std::vector<DType>& float_dtypes() {
  static const std::vector<DType> t = {DType::float32, DType::float64};
  return t;
}
inline const std::vector<DType>& storage_dtypes() {
  static const std::vector<DType> t = {DType::float32, DType::float64, DType::bfloat16, DType::float16};
  return t;
}

// A loop over `sizes` (outermost first) with one stride list per operand (operand 0: the output).
StridedLoop make_loop(std::initializer_list<int64_t> sizes, std::initializer_list<std::initializer_list<int64_t>> strides);
// A contiguous 1-d loop of n elements over `operands` operands.
StridedLoop dense_loop(int operands, int64_t n);
// Elements operand k spans (1 + the largest offset it reaches).
int64_t extent(const StridedLoop& L, int k);
// " strides a,b|c,d" for a problem's note (StridedLoop::str() names only the sizes).
std::string strides_note(const StridedLoop& L);

// Draws that keep a function defined: positive values, values away from zero.
inline Gen positive() { return uniform(0.5, 2.0); }

}  // namespace kiln::oracle

namespace kiln::oracle {

// A case over `descs` (no variants), its buffers laid out by `args`.
template <class Op>
Case<Op> case_over(const std::vector<typename Op::Desc>& descs,
                   std::function<std::vector<Arg>(const typename Op::Desc&)> args) {
  Case<Op> c;
  for (const auto& d : descs) c.problems.push_back({d});
  c.args = [args](const typename Op::Desc& d, int) { return args(d); };
  return c;
}

}  // namespace kiln::oracle
