// Op wrappers of the loss family: argument checks (shapes, dtypes, class indices), dispatch,
// autograd. Kernels: kernels/cpu/{ref,native}/loss.*. Test: ctest --test-dir build -R loss
#include "engine/ops/loss.h"

#include "engine/autograd.h"
#include "engine/dispatch.h"
#include "engine/graph_op.h"
#include "engine/ops/iter.h"

namespace kiln {
namespace {



struct ClassPlan {
  ClassLossDesc d;
  Tensor xc, tc;  // contiguous input and target
  Shape out;
};

ClassPlan plan_class(const Tensor& x, const Tensor& target, Reduction reduction, int64_t ignore_index,
                     double label_smoothing, const char* op) {
  KILN_CHECK(x.defined() && target.defined(), op, ": undefined input or target");
  KILN_CHECK(is_floating(x.dtype()), op, ": input must be floating point, got ", x.dtype(), " ",
             shape_str(x.sizes()));
  KILN_CHECK(x.dim() >= 1, op, ": input must have a class dim, got a 0-d tensor");
  check_same_device(op, x, target);
  KILN_CHECK(target.dtype() == DType::int64, op, ": target must hold int64 class indices, got ", target.dtype(), " ",
             shape_str(target.sizes()), " for input ", shape_str(x.sizes()),
             " (class-probability targets are not supported)");
  KILN_CHECK(label_smoothing >= 0 && label_smoothing <= 1, op, ": label_smoothing must be in [0, 1], got ",
             label_smoothing);
  ClassPlan p;
  Shape expected;
  if (x.dim() == 1) {  // unbatched [C] with a 0-d target
    p.d.C = x.size(0);
  } else {
    p.d.N = x.size(0);
    p.d.C = x.size(1);
    expected.push_back(x.size(0));
    for (int64_t k = 2; k < x.dim(); ++k) {
      expected.push_back(x.size(k));
      p.d.S *= x.size(k);
    }
  }
  KILN_CHECK(target.sizes() == expected, op, ": target ", shape_str(target.sizes()), " does not match input ",
             shape_str(x.sizes()), " (expected target ", shape_str(expected), ")");
  KILN_CHECK(p.d.C > 0, op, ": input ", shape_str(x.sizes()), " has no classes");
  p.d.dtype = x.dtype();
  p.d.reduction = reduction;
  p.d.label_smoothing = label_smoothing;
  p.d.ignore_index = ignore_index;
  p.xc = x.contiguous();
  p.tc = target.contiguous();
  // Validated here, serially, so kernels never see a bad index (and never throw inside OpenMP).
  // A CUDA target is checked from a host copy (N integers; the copy waits for the device, as
  // PyTorch's device-side assert would surface at the next synchronise anyway).
  const Tensor host_t = p.tc.device().is_cpu() ? p.tc : p.tc.to(Device());
  const int64_t* t = host_t.data<int64_t>();
  for (int64_t i = 0; i < p.tc.numel(); ++i)
    KILN_CHECK(t[i] == ignore_index || (t[i] >= 0 && t[i] < p.d.C), op, ": target class index ", t[i],
               " (at flat position ", i, ") is out of range for ", p.d.C, " classes (input ", shape_str(x.sizes()),
               ", target ", shape_str(target.sizes()), ", ignore_index ", ignore_index, ")");
  p.out = reduction == Reduction::none ? target.sizes() : Shape{};
  return p;
}

struct PointPlan {
  PointLossDesc d;
  Tensor xc, tc, pw;
};

PointPlan plan_point(const Tensor& x, const Tensor& target, Reduction reduction, const Tensor& pos_weight,
                     PointLoss kind, const char* op) {
  KILN_CHECK(x.defined() && target.defined(), op, ": undefined input or target");
  KILN_CHECK(is_floating(x.dtype()), op, ": input must be floating point, got ", x.dtype(), " ",
             shape_str(x.sizes()));
  KILN_CHECK(target.sizes() == x.sizes(), op, ": target ", shape_str(target.sizes()),
             " does not match input ", shape_str(x.sizes()), " (they must have the same shape)");
  check_same_device(op, x, target);
  if (pos_weight.defined()) check_same_device(op, x, pos_weight);
  KILN_CHECK(target.dtype() == x.dtype(), op, ": target dtype ", target.dtype(), " does not match input dtype ",
             x.dtype(), " (input ", shape_str(x.sizes()), ")");
  PointPlan p;
  p.d.kind = kind;
  p.d.dtype = x.dtype();
  p.d.n = x.numel();
  p.d.reduction = reduction;
  p.xc = x.contiguous();
  p.tc = target.contiguous();
  if (pos_weight.defined()) {
    KILN_CHECK(pos_weight.dtype() == x.dtype(), op, ": pos_weight dtype ", pos_weight.dtype(),
               " does not match input dtype ", x.dtype());
    KILN_CHECK(broadcast_shapes(pos_weight.sizes(), x.sizes(), op) == x.sizes(), op, ": pos_weight ",
               shape_str(pos_weight.sizes()), " does not broadcast to input ", shape_str(x.sizes()));
    p.pw = pos_weight.detach().expand(x.sizes()).contiguous();
  }
  return p;
}

const void* ptr_or_null(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

Tensor class_loss(const Tensor& x0, const Tensor& target, Reduction reduction, double label_smoothing,
                  int64_t ignore_index, bool from_logits) {
  const char* op = from_logits ? "cross_entropy" : "nll_loss";
  ClassPlan p = plan_class(x0, target, reduction, ignore_index, label_smoothing, op);
  const TensorOptions o = TensorOptions(p.d.dtype).with_device(x0.device());
  Tensor y = empty(p.out, o);
  const DeviceType dev = x0.device().type;
  if (from_logits) {
    Tensor lse = empty({p.d.N * p.d.S}, o);
    dispatch<kernel_op::cross_entropy_fwd>(dev, p.d, p.xc.data_ptr(), p.tc.data<int64_t>(), y.data_ptr(), lse.data_ptr());
    autograd::record_fn("CrossEntropyBackward", {x0}, {&y}, [d = p.d, xc = p.xc, tc = p.tc, lse](std::vector<Tensor>& g) {
      Tensor gc = g[0].to(d.dtype).contiguous();
      Tensor gx = empty(xc.sizes(), TensorOptions(d.dtype).with_device(xc.device()));
      dispatch<kernel_op::cross_entropy_bwd>(xc.device().type, d, xc.data_ptr(), tc.data<int64_t>(), lse.data_ptr(), gc.data_ptr(),
                  gx.data_ptr());
      return std::vector<Tensor>{gx};
    });
  } else {
    dispatch<kernel_op::nll_fwd>(dev, p.d, p.xc.data_ptr(), p.tc.data<int64_t>(), y.data_ptr());
    autograd::record_fn("NllLossBackward", {x0}, {&y}, [d = p.d, xs = x0.sizes(), tc = p.tc, dev0 = x0.device()](
                                                             std::vector<Tensor>& g) {
      Tensor gc = g[0].to(d.dtype).contiguous();
      Tensor gx = empty(xs, TensorOptions(d.dtype).with_device(dev0));
      dispatch<kernel_op::nll_bwd>(dev0.type, d, tc.data<int64_t>(), gc.data_ptr(), gx.data_ptr());
      return std::vector<Tensor>{gx};
    });
  }
  return y;
}

Tensor point_loss(const Tensor& x0, const Tensor& t0, Reduction reduction, const Tensor& pos_weight, PointLoss kind) {
  const char* op = kind == PointLoss::mse ? "mse_loss" : "binary_cross_entropy_with_logits";
  PointPlan p = plan_point(x0, t0, reduction, pos_weight, kind, op);
  const TensorOptions o = TensorOptions(p.d.dtype).with_device(x0.device());
  Tensor y = empty(reduction == Reduction::none ? x0.sizes() : Shape{}, o);
  dispatch<kernel_op::point_loss_fwd>(x0.device().type, p.d, p.xc.data_ptr(), p.tc.data_ptr(), ptr_or_null(p.pw), y.data_ptr());
  auto bwd = [d = p.d, xc = p.xc, tc = p.tc, pw = p.pw, need_x = x0.requires_grad(),
              need_t = t0.requires_grad()](std::vector<Tensor>& g) {
    Tensor gc = g[0].to(d.dtype).contiguous();
    const TensorOptions o = TensorOptions(d.dtype).with_device(xc.device());
    Tensor gx = need_x ? empty(xc.sizes(), o) : Tensor();
    Tensor gt = need_t ? empty(xc.sizes(), o) : Tensor();
    dispatch<kernel_op::point_loss_bwd>(xc.device().type, d, xc.data_ptr(), tc.data_ptr(), ptr_or_null(pw), gc.data_ptr(),
                   gx.defined() ? gx.data_ptr() : nullptr, gt.defined() ? gt.data_ptr() : nullptr);
    return std::vector<Tensor>{gx, gt};
  };
  if (kind == PointLoss::mse)
    autograd::record_fn("MseLossBackward", {x0, t0}, {&y}, bwd);
  else
    autograd::record_fn("BinaryCrossEntropyWithLogitsBackward", {x0, t0}, {&y}, bwd);
  return y;
}

}  // namespace

namespace ops {

// Training losses: graph ops for their half-type routing (float32); a trace records them, but
// they have no ONNX form.
Tensor cross_entropy(const Tensor& input, const Tensor& target, Reduction reduction, double label_smoothing,
                     int64_t ignore_index) {
  return graph::call(GraphOp::cross_entropy, {input, target}, graph::no_attrs, [&](const Tensor* in) {
    return class_loss(in[0], in[1], reduction, label_smoothing, ignore_index, true);
  });
}

Tensor nll_loss(const Tensor& input, const Tensor& target, Reduction reduction, int64_t ignore_index) {
  return graph::call(GraphOp::nll_loss, {input, target}, graph::no_attrs, [&](const Tensor* in) {
    return class_loss(in[0], in[1], reduction, 0.0, ignore_index, false);
  });
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, Reduction reduction,
                                        const Tensor& pos_weight) {
  return graph::call(GraphOp::binary_cross_entropy_with_logits, {input, target, pos_weight}, graph::no_attrs,
                     [&](const Tensor* in) { return point_loss(in[0], in[1], reduction, in[2], PointLoss::bce_logits); });
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  return graph::call(GraphOp::mse_loss, {input, target}, graph::no_attrs, [&](const Tensor* in) {
    return point_loss(in[0], in[1], reduction, Tensor(), PointLoss::mse);
  });
}

}  // namespace ops


}  // namespace kiln
