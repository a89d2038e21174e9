// kiln's own CPU pooling and LRN kernels (float32 and float64, contiguous NCHW).
// Forward runs OpenMP over (plane, output row); backward over planes, so the scatter into one
// plane stays in one thread (deterministic, no atomics). Inner loops run over output columns
// with the image border split off, so they carry no bounds checks and vectorise. Max pooling
// visits window taps in PyTorch's order (rows, then columns) so ties and NaNs pick the same
// element as the reference kernel.
//   tests: ctest --test-dir build -R pool      bench: build/bench/bench_pool
#pragma once

#include "kernels/common/pool.h"

namespace kiln::native {

bool supports_pool(const PoolDesc& d);
void pool_fwd(const PoolDesc& d, const void* src, void* dst, int64_t* index);
void pool_bwd(const PoolDesc& d, const void* diff_dst, const int64_t* index, void* diff_src);
// Channels-last (d.nhwc), pool_nhwc.cpp; pool_fwd/pool_bwd call them.
void pool_fwd_nhwc(const PoolDesc& d, const void* src, void* dst, int64_t* index);
void pool_bwd_nhwc(const PoolDesc& d, const void* diff_dst, const int64_t* index, void* diff_src);

bool supports_adaptive_pool(const AdaptivePoolDesc& d);
void adaptive_pool_fwd(const AdaptivePoolDesc& d, const void* src, void* dst, int64_t* index);
void adaptive_pool_bwd(const AdaptivePoolDesc& d, const void* diff_dst, const int64_t* index, void* diff_src);

bool supports_lrn(const LrnDesc& d);
void lrn_fwd(const LrnDesc& d, const void* src, void* dst, void* scale);
void lrn_bwd(const LrnDesc& d, const void* src, const void* dst, const void* scale, const void* diff_dst,
             void* diff_src);

}  // namespace kiln::native
