// kiln's own CPU padding and upsampling kernels (float32 and float64, contiguous planes).
// Forward runs OpenMP over output rows: padding copies the in-image span of a row with memcpy
// and maps only the border columns; bilinear interpolates a whole input row pair vertically
// (unit stride) before the horizontal gather. Backward runs over planes, so the scatter-adds of
// reflect/replicate padding and of upsampling stay within one thread (deterministic).
//   tests: ctest --test-dir build -R shape      bench: build/bench/bench_pool
#pragma once

#include "kernels/common/shape.h"

namespace kiln::native {

bool supports_pad(const PadDesc& d);
void pad_fwd(const PadDesc& d, const void* src, void* dst);
void pad_bwd(const PadDesc& d, const void* diff_dst, void* diff_src);

bool supports_upsample(const UpsampleDesc& d);
void upsample_fwd(const UpsampleDesc& d, const void* src, void* dst);
void upsample_bwd(const UpsampleDesc& d, const void* diff_dst, void* diff_src);

}  // namespace kiln::native
