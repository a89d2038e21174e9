// kiln's own CPU reductions: OpenMP over outputs, each output reduced by one thread in a fixed
// order (deterministic for any thread count); float32 sums use 8 partial accumulators so the
// contiguous case vectorises.
#pragma once

#include "kernels/common/reduce.h"

namespace kiln::native {

bool supports_reduce(const ReduceDesc& d);
void reduce(const ReduceDesc& d, const void* src, void* dst, int64_t* index);
void index_scatter(const IndexScatterDesc& d, const void* src, const int64_t* index, void* dst);

}  // namespace kiln::native
