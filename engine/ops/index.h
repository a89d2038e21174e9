// Indexing and selection, as PyTorch's: index_select, gather, scatter and scatter_add, index_put_
// (with accumulate), where and masked_fill, sort and topk (values and indices), cumsum.
// Differentiable where PyTorch's are (the values; never the indices). Indices are int64 (int32
// is converted) on the tensor's device; every one is range-checked before a kernel reads it, and
// one out of range is a kiln::Error naming the op, the dim, its size and the bad index.
// Kernels: kernels/common/index.h (ref, native CPU, native CUDA).
#pragma once

#include <vector>

#include "engine/ops/reduce.h"  // ValuesIndices
#include "engine/scalar.h"
#include "engine/tensor.h"

namespace kiln::ops {

// x's slices index[0], index[1], ... along dim (index 1-d or 0-d); the result has index.numel()
// there.
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// out[..., j, ...] = x[..., index[..., j, ...], ...] along dim; index has x's rank and sizes
// except along dim, and gives the result's shape.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// A copy of x with out[..., index[..., j, ...], ...] = src[..., j, ...] along dim (scatter_add:
// +=). index and src have one shape, x's sizes except along dim. Repeated indices: scatter keeps
// the last, scatter_add sums them all.
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// x[indices[0], indices[1], ...] = values (+= with accumulate), in place, PyTorch's
// x.index_put_((i0, i1), v): one int64 tensor per leading dim (broadcast to one shape, negative
// counting from the end) or a single boolean mask of x's leading shape; values broadcast to the
// indexed shape followed by x's remaining sizes. Not recorded by autograd; refused on a leaf that
// requires grad (as fill_). Returns x.
Tensor& index_put_(Tensor& x, const std::vector<Tensor>& indices, const Tensor& values, bool accumulate = false);

// cond ? a : b elementwise with broadcasting; cond boolean, a and b promoted to one dtype.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
// x with `value` where mask (boolean, broadcast to x) is true.
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value);

// Along dim, sorted ascending (or descending), with the positions the values came from; ties
// keep their order (stable), NaN sorts last (first when descending), as torch.sort(stable=True).
ValuesIndices sort(const Tensor& x, int64_t dim = -1, bool descending = false);
// The k largest (or smallest) along dim, in sorted order; 0 <= k <= x.size(dim).
ValuesIndices topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true);
// Running sum along dim; integers and booleans sum as int64 (torch.cumsum).
Tensor cumsum(const Tensor& x, int64_t dim);

}  // namespace kiln::ops
