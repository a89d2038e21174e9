// kiln's own CPU elementwise kernels: OpenMP over the linear index (grain 32 Ki elements), the op
// resolved at compile time so the contiguous inner loop vectorises. float32, float64 and bfloat16;
// int32, int64 and uint8 for the integer ops (integer_unary_op, integer_binary_op: wrapping);
// compare takes every dtype into booleans; copy, fill and random take every dtype.
#pragma once

#include "kernels/common/elementwise.h"

namespace kiln::native {

bool supports_unary(const UnaryDesc& d);
void unary(const UnaryDesc& d, const void* src, void* dst);
bool supports_binary(const BinaryDesc& d);
void binary(const BinaryDesc& d, const void* a, const void* b, void* dst);
void compare(const CompareDesc& d, const void* a, const void* b, void* dst);
void copy(const CopyDesc& d, const void* src, void* dst);
void fill(const FillDesc& d, void* dst);
void random(const RandomDesc& d, void* dst);

}  // namespace kiln::native
