// kiln's own CUDA indexing kernels (kernels/common/index.h), the same descriptors and signatures
// as kernels/cpu/native/index.h; pointers are device pointers, work goes on current_stream().
// gather and where: a thread per output element. scatter and cumsum: a thread per column (o, i)
// walking n in order, so repeated indices keep the last value and sums have one order (no
// atomics: deterministic). sort and topk: a thread per element finds its rank in its row (O(n)
// per element; rows up to a few thousand), stable and NaN-last as on the CPU.
//   emu test: ctest --test-dir build -R oracle_emu
#pragma once

#include "kernels/common/index.h"
#include "kernels/cuda/namespace.h"

KILN_CUDA_NAMESPACE_BEGIN

void gather(const GatherDesc& d, const void* src, const int64_t* index, void* dst);
void scatter(const ScatterDesc& d, const void* src, const int64_t* index, void* dst);
void where(const WhereDesc& d, const void* cond, const void* a, const void* b, void* dst);
bool supports_sort(const SortDesc& d);
void sort(const SortDesc& d, const void* src, void* values, int64_t* indices);
bool supports_cumsum(const ScanDesc& d);
void cumsum(const ScanDesc& d, const void* src, void* dst);

KILN_CUDA_NAMESPACE_END
