// oneDNN's n-ary primitives: concat (float32, bfloat16) and sum (float32) on the plain blocks of
// kernels/common/concat.h, same semantics as kernels/cpu/native/concat.h. Operands are 2-d
// row-major memory ([outer, width]); primitives are cached per descriptor and thread count.
// supports_*() say no to empty operands and what oneDNN cannot express.
//   Test: ctest --test-dir build -R test_concat_sum     Bench: build/bench/bench_backends --only concat
#pragma once

#include "kernels/common/concat.h"

namespace kiln::onednn {

bool supports_concat(const ConcatDesc& d);
void concat(const ConcatDesc& d, const void* const* srcs, void* dst);
bool supports_sum(const SumDesc& d);
void sum(const SumDesc& d, const void* const* srcs, void* dst);

}  // namespace kiln::onednn
