// softmax and log_softmax: argument checks, output allocation, dispatch, autograd.
// Kernels: kernels/cpu/{ref,native}/norm.* (softmax). Test: ctest --test-dir build -R 'softmax|oracle'
#include "engine/ops/softmax.h"

#include <algorithm>

#include "engine/autograd.h"
#include "engine/dispatch.h"
#include "engine/graph_op.h"

namespace kiln {
namespace {

Tensor softmax_impl(const Tensor& x0, int64_t dim, bool log) {
  const char* name = log ? "log_softmax" : "softmax";
  KILN_CHECK(x0.defined(), name, ": undefined tensor");
  KILN_CHECK(is_floating(x0.dtype()), name, ": needs a floating-point tensor, got ", x0.dtype(), " ",
             shape_str(x0.sizes()));
  const Tensor& x = x0;
  dim = wrap_dim(dim, std::max<int64_t>(x.dim(), 1), name);
  SoftmaxDesc d;
  d.dtype = x.dtype();
  d.log = log;
  for (int64_t k = 0; k < x.dim(); ++k) (k < dim ? d.outer : k > dim ? d.inner : d.dim) *= x.size(k);
  Tensor xc = x.contiguous();
  Tensor y = empty(x.sizes(), TensorOptions(x.dtype()).with_device(x.device()));
  if (x.numel() > 0) dispatch<kernel_op::softmax_fwd>(x.device().type, d, xc.data_ptr(), y.data_ptr());
  auto bwd = [d, yd = y.detach()](std::vector<Tensor>& g) {
    Tensor gc = g[0].to(d.dtype).contiguous();
    Tensor gx = empty(yd.sizes(), TensorOptions(d.dtype).with_device(yd.device()));
    if (yd.numel() > 0) dispatch<kernel_op::softmax_bwd>(yd.device().type, d, yd.data_ptr(), gc.data_ptr(), gx.data_ptr());
    return std::vector<Tensor>{gx};
  };
  if (log)
    autograd::record_fn("LogSoftmaxBackward", {x0}, {&y}, bwd);
  else
    autograd::record_fn("SoftmaxBackward", {x0}, {&y}, bwd);
  return y;
}

}  // namespace

namespace ops {

Tensor softmax(const Tensor& x, int64_t dim) {
  return graph::call(
      GraphOp::softmax, {x}, [&] { return std::vector<trace::Attr>{trace::ints("dim", {dim})}; },
      [&](const Tensor* in) { return softmax_impl(in[0], dim, false); });
}
Tensor log_softmax(const Tensor& x, int64_t dim) {
  return graph::call(
      GraphOp::log_softmax, {x}, [&] { return std::vector<trace::Attr>{trace::ints("dim", {dim})}; },
      [&](const Tensor* in) { return softmax_impl(in[0], dim, true); });
}

}  // namespace ops
}  // namespace kiln
