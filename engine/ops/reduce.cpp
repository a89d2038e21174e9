#include "engine/ops/reduce.h"

#include <algorithm>

#include "engine/autograd.h"
#include "engine/dispatch.h"
#include "engine/ops/elementwise.h"
#include "kernels/common/reduce.h"

namespace kiln {
namespace {

using ReduceTable = OpTable<ReduceDesc, const void*, void*, int64_t*>;

struct Plan {
  Tensor src;      // contiguous, reduced dims adjacent
  ReduceDesc desc;
  Shape out_keep;  // output shape with reduced dims kept as 1
  Shape out;       // output shape as requested
};

std::vector<int64_t> normalise_dims(const Tensor& x, std::vector<int64_t> dims, const char* op) {
  if (dims.empty())
    for (int64_t d = 0; d < x.dim(); ++d) dims.push_back(d);
  for (auto& d : dims) d = wrap_dim(d, std::max<int64_t>(x.dim(), 1), op);
  std::sort(dims.begin(), dims.end());
  KILN_CHECK(std::adjacent_find(dims.begin(), dims.end()) == dims.end(), op, ": repeated dim in reduction of ",
             shape_str(x.sizes()));
  return dims;
}

Plan plan(const Tensor& x, std::vector<int64_t> dims, bool keepdim, ReduceOp op, const char* name) {
  KILN_CHECK(x.defined(), name, ": undefined tensor");
  KILN_CHECK(is_floating(x.dtype()) || x.dtype() == DType::int64, name, ": dtype ", x.dtype(), " is not supported");
  dims = normalise_dims(x, dims, name);
  Plan p;
  const int64_t nd = x.dim();
  std::vector<bool> red(size_t(std::max<int64_t>(nd, 1)), false);
  for (auto d : dims) red[size_t(d)] = true;
  for (int64_t d = 0; d < nd; ++d) {
    p.out_keep.push_back(red[d] ? 1 : x.size(d));
    if (!red[d] || keepdim) p.out.push_back(red[d] ? 1 : x.size(d));
  }
  // Reduced dims form one run [first, last]? Then [outer, reduce, inner] needs no permute.
  bool run = nd == 0 || (dims.back() - dims.front() + 1 == int64_t(dims.size()));
  Tensor src = x;
  int64_t outer = 1, reduce = 1, inner = 1;
  if (nd == 0) {
    src = x.contiguous();
  } else if (run) {
    src = x.contiguous();
    for (int64_t d = 0; d < nd; ++d) (d < dims.front() ? outer : d > dims.back() ? inner : reduce) *= x.size(d);
  } else {
    Shape perm;
    for (int64_t d = 0; d < nd; ++d) if (!red[d]) { perm.push_back(d); outer *= x.size(d); }
    for (int64_t d : dims) { perm.push_back(d); reduce *= x.size(d); }
    src = x.permute(perm).contiguous();
  }
  p.src = src;
  p.desc.op = op;
  p.desc.dtype = x.dtype();
  p.desc.outer = outer;
  p.desc.reduce = reduce;
  p.desc.inner = inner;
  return p;
}

Tensor run_reduce(Plan& p, Tensor* indices) {
  Tensor y = empty(p.out, TensorOptions(p.desc.dtype).with_device(p.src.device()));
  int64_t* idx = nullptr;
  if (indices) {
    *indices = empty(p.out, TensorOptions(DType::int64).with_device(p.src.device()));
    idx = indices->data<int64_t>();
    p.desc.want_index = true;
  }
  dispatch<kernel_op::reduce>(p.src.device().type, p.desc, p.src.data_ptr(),
                                                             y.data_ptr(), idx);
  return y;
}

// The dtype a reduction computes in: float32 for the 16-bit floats, int64 for integers and
// booleans (sums of them are int64, as PyTorch's; maxima convert back).
Tensor half_wrap(const Tensor& x) {
  if (!x.defined()) return x;
  if (is_half(x.dtype())) return x.to(DType::float32);
  return is_floating(x.dtype()) ? x : x.to(DType::int64);
}

}  // namespace

namespace ops {

Tensor sum(const Tensor& x0, const std::vector<int64_t>& dims, bool keepdim) {
  Tensor x = half_wrap(x0);
  Plan p = plan(x, dims, keepdim, ReduceOp::sum, "sum");
  Tensor y = run_reduce(p, nullptr);
  if (x.dtype() != x0.dtype() && is_floating(x0.dtype())) y = y.to(x0.dtype());  // integer sums stay int64
  autograd::record_fn("SumBackward", {x0}, {&y}, [keep = p.out_keep, xs = x0.sizes()](std::vector<Tensor>& g) {
    return std::vector<Tensor>{g[0].reshape(keep).expand(xs).contiguous()};
  });
  return y;
}

Tensor mean(const Tensor& x0, const std::vector<int64_t>& dims, bool keepdim) {
  KILN_CHECK(x0.defined(), "mean: undefined tensor");
  KILN_CHECK(is_floating(x0.dtype()), "mean: dtype ", x0.dtype(),
             " is not supported (a floating-point tensor; convert integers with .to(float32))");
  Tensor x = half_wrap(x0);
  Plan p = plan(x, dims, keepdim, ReduceOp::mean, "mean");
  KILN_CHECK(p.desc.reduce > 0, "mean: reduction over an empty dim of ", shape_str(x0.sizes()));
  const double n = double(p.desc.reduce);
  Tensor y = run_reduce(p, nullptr);
  if (x.dtype() != x0.dtype()) y = y.to(x0.dtype());
  autograd::record_fn("MeanBackward", {x0}, {&y}, [keep = p.out_keep, xs = x0.sizes(), n](std::vector<Tensor>& g) {
    Tensor gx = empty(xs, TensorOptions(g[0].dtype()).with_device(g[0].device()));
    gx.copy_(g[0].reshape(keep));
    return std::vector<Tensor>{gx * (1.0 / n)};
  });
  return y;
}

static ValuesIndices max_min(const Tensor& x0, int64_t dim, bool keepdim, ReduceOp op, const char* name) {
  Tensor x = half_wrap(x0);
  KILN_CHECK(x.defined() && x.dim() > 0, name, ": needs a tensor with at least one dim");
  dim = wrap_dim(dim, x.dim(), name);
  KILN_CHECK(x.size(dim) > 0, name, ": reduction over an empty dim ", dim, " of ", shape_str(x.sizes()));
  Plan p = plan(x, {dim}, keepdim, op, name);
  ValuesIndices r;
  r.values = run_reduce(p, &r.indices);
  if (x.dtype() != x0.dtype()) r.values = r.values.to(x0.dtype());
  IndexScatterDesc sd;
  sd.dtype = x.dtype();
  sd.outer = p.desc.outer;
  sd.reduce = p.desc.reduce;
  sd.inner = p.desc.inner;
  autograd::record_fn("MaxBackward", {x0}, {&r.values},
                      [sd, idx = r.indices, xs = x0.sizes(), dt = x0.dtype()](std::vector<Tensor>& g) {
                        Tensor gc = g[0].to(sd.dtype).contiguous();
                        Tensor gx = empty(xs, TensorOptions(sd.dtype).with_device(gc.device()));
                        dispatch<kernel_op::index_scatter>(
                            gc.device().type, sd, gc.data_ptr(), idx.data<int64_t>(), gx.data_ptr());
                        return std::vector<Tensor>{gx.to(dt)};
                      });
  return r;
}

ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim) { return max_min(x, dim, keepdim, ReduceOp::max, "max"); }
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim) { return max_min(x, dim, keepdim, ReduceOp::min, "min"); }

Tensor amax(const Tensor& x) {
  KILN_CHECK(x.defined() && x.numel() > 0, "amax: needs a non-empty tensor");
  return max(x.reshape({-1}), 0).values;
}

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  NoGradGuard ng;
  return max(x, dim, keepdim).indices;
}
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim) {
  NoGradGuard ng;
  return min(x, dim, keepdim).indices;
}

}  // namespace ops


}  // namespace kiln
