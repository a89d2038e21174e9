#include "engine/ops/iter.h"

#include <algorithm>

namespace kiln {

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    KILN_CHECK(x == y || x == 1 || y == 1, op, ": shapes ", shape_str(a), " and ", shape_str(b),
               " cannot be broadcast together (dim ", i, ": ", x, " vs ", y, ")");
    out[i] = (x == 1) ? y : x;
  }
  return out;
}

void check_same_device(const char* op, const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.device() == b.device(), op, ": operands on different devices, ", a.str(), " and ", b.str(),
             " (move one with .to(device))");
}

StridedLoop make_loop(const Tensor& out, const std::vector<const Tensor*>& inputs) {
  const Shape& shape = out.sizes();
  const int nd = int(shape.size());
  const int nops = 1 + int(inputs.size());
  KILN_CHECK(nops <= kMaxOperands, "make_loop: too many operands");
  // Full-rank strides per operand, 0 where broadcast.
  std::vector<Shape> st(nops, Shape(nd, 0));
  st[0] = out.strides();
  for (int k = 1; k < nops; ++k) {
    const Tensor& t = *inputs[k - 1];
    check_same_device("elementwise op", out, t);
    int off = nd - int(t.dim());
    KILN_CHECK(off >= 0, "make_loop: input ", shape_str(t.sizes()), " has more dims than output ", shape_str(shape));
    for (int d = 0; d < t.dim(); ++d) {
      int64_t s = t.size(d);
      KILN_CHECK(s == shape[off + d] || s == 1, "make_loop: input ", shape_str(t.sizes()),
                 " does not broadcast to ", shape_str(shape));
      st[k][off + d] = (s == 1) ? 0 : t.stride(d);
    }
  }
  // Walk the dims in the output's memory order (outermost first), as ATen's TensorIterator
  // does: a channels-last result then coalesces to one contiguous run instead of a strided
  // N, C, H*W loop. Row-major outputs keep their order.
  std::vector<int> order(static_cast<size_t>(nd));
  for (int d = 0; d < nd; ++d) order[size_t(d)] = d;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if (shape[a] == 1 || shape[b] == 1) return false;
    return st[0][a] > st[0][b];
  });
  // Drop size-1 dims, then merge dim i into the kept dim before it where contiguous for all.
  std::vector<int64_t> sizes;
  std::vector<Shape> cst(nops);
  for (int d : order) {
    if (shape[d] == 1) continue;
    bool merge = !sizes.empty();
    for (int k = 0; k < nops && merge; ++k) merge = cst[k].back() == st[k][d] * shape[d];
    if (merge) {
      sizes.back() *= shape[d];
      for (int k = 0; k < nops; ++k) cst[k].back() = st[k][d];
    } else {
      sizes.push_back(shape[d]);
      for (int k = 0; k < nops; ++k) cst[k].push_back(st[k][d]);
    }
  }
  KILN_CHECK(int(sizes.size()) <= kMaxLoopDims, "elementwise ops support at most ", kMaxLoopDims,
             " non-mergeable dims, got shape ", shape_str(shape));
  StridedLoop L;
  L.ndim = int(sizes.size());
  L.noperands = nops;
  for (int d = 0; d < L.ndim; ++d) {
    L.sizes[d] = sizes[d];
    for (int k = 0; k < nops; ++k) L.strides[k][d] = cst[k][d];
  }
  return L;
}

}  // namespace kiln
