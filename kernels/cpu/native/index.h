// kiln's own CPU indexing kernels (kernels/common/index.h), OpenMP over independent rows or
// columns: gather and where over output elements, scatter, sort and cumsum over the columns
// (o, i) of [outer, n, inner], each walking n in order (so a repeated scatter index keeps the last
// value, deterministically). Every dtype for gather, scatter and where; sort takes every dtype
// but boolean; cumsum float32, float64 and int64.
#pragma once

#include "kernels/common/index.h"

namespace kiln::native {

void gather(const GatherDesc& d, const void* src, const int64_t* index, void* dst);
void scatter(const ScatterDesc& d, const void* src, const int64_t* index, void* dst);
void where(const WhereDesc& d, const void* cond, const void* a, const void* b, void* dst);
bool supports_sort(const SortDesc& d);
void sort(const SortDesc& d, const void* src, void* values, int64_t* indices);
bool supports_cumsum(const ScanDesc& d);
void cumsum(const ScanDesc& d, const void* src, void* dst);

}  // namespace kiln::native
