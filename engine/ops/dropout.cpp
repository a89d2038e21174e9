// Inverted dropout: argument checks, output and mask allocation, dispatch, autograd.
// Kernels: kernels/cpu/{ref,native}/norm.* (dropout). Test: ctest --test-dir build -R 'dropout|oracle'
#include "engine/ops/dropout.h"

#include "engine/autograd.h"
#include "engine/dispatch.h"
#include "engine/graph_op.h"

namespace kiln::ops {

namespace {

Tensor dropout_body(const Tensor& x0, double p, Generator* gen) {
  KILN_CHECK(is_floating(x0.dtype()), "dropout: needs a floating-point tensor, got ", x0.dtype(), " ",
             shape_str(x0.sizes()));
  const Tensor& x = x0;
  Generator& g = gen ? *gen : default_generator();
  DropoutDesc d;
  d.dtype = x.dtype();
  d.n = x.numel();
  d.p = p;
  d.seed = g.seed();
  d.offset = g.advance(uint64_t(d.n));
  Tensor xc = x.contiguous();
  Tensor y = empty(x.sizes(), TensorOptions(x.dtype()).with_device(x.device()));
  Tensor mask = empty(x.sizes(), TensorOptions(DType::uint8).with_device(x.device()));
  if (d.n > 0) dispatch<kernel_op::dropout_fwd>(x.device().type, d, xc.data_ptr(), y.data_ptr(), mask.data<uint8_t>());
  autograd::record_fn("DropoutBackward", {x0}, {&y}, [d, mask](std::vector<Tensor>& g) {
    Tensor gc = g[0].to(d.dtype).contiguous();
    Tensor gx = empty(mask.sizes(), TensorOptions(d.dtype).with_device(mask.device()));
    if (d.n > 0) dispatch<kernel_op::dropout_bwd>(mask.device().type, d, gc.data_ptr(), mask.data<uint8_t>(), gx.data_ptr());
    return std::vector<Tensor>{gx};
  });
  return y;
}

}  // namespace

Tensor dropout(const Tensor& x, double p, bool training, Generator* gen) {
  KILN_CHECK(x.defined(), "dropout: undefined tensor");
  KILN_CHECK(p >= 0 && p <= 1, "dropout: probability has to be between 0 and 1, but got ", p, " (input ",
             shape_str(x.sizes()), ")");
  if (!training || p == 0) return x;  // the identity, in a trace too (export writes no node for it)
  return graph::call(
      GraphOp::dropout, {x},
      [&] { return std::vector<trace::Attr>{trace::real("p", p), trace::ints("training", {training})}; },
      [&](const Tensor* in) { return dropout_body(in[0], p, gen); });
}

}  // namespace kiln::ops
