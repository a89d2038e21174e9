// kiln's own concat (block copies, parallel over (row, input) pairs so that a batch of 16 NCHW
// rows still feeds every thread; any dtype) and n-ary sum (float32/float64, parallel over
// cache-sized chunks, inputs added in order: the bits do not depend on the thread count).
// Layouts in kernels/common/concat.h. dst must not alias a source.
//   ctest --test-dir build -R test_concat_sum     build/bench/bench_backends --only concat
#pragma once

#include "kernels/common/concat.h"

namespace kiln::native {

bool supports_concat(const ConcatDesc& d);
void concat(const ConcatDesc& d, const void* const* srcs, void* dst);
bool supports_sum(const SumDesc& d);
// dst may be srcs[0] (accumulation in place).
void sum(const SumDesc& d, const void* const* srcs, void* dst);

}  // namespace kiln::native
