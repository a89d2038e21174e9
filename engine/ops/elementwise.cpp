#include "engine/ops/elementwise.h"

#include "engine/autograd.h"
#include "engine/dispatch.h"
#include "engine/graph_op.h"
#include "engine/ops/iter.h"
#include "engine/ops/reduce.h"
#include "kernels/common/elementwise.h"

namespace kiln {
namespace {

using UnaryTable = OpTable<UnaryDesc, const void*, void*>;
using BinaryTable = OpTable<BinaryDesc, const void*, const void*, void*>;


void check_pair(const Tensor& a, const Tensor& b, const char* op) {
  KILN_CHECK(a.defined() && b.defined(), op, ": undefined tensor operand");
  KILN_CHECK(a.dtype() == b.dtype(), op, ": dtype mismatch, ", a.dtype(), " ", shape_str(a.sizes()), " vs ",
             b.dtype(), " ", shape_str(b.sizes()));
  KILN_CHECK(a.device() == b.device(), op, ": device mismatch, ", a.device(), " vs ", b.device());
}

// The memory format of an elementwise result, as PyTorch's TensorIterator picks it: channels-last
// when an operand of the result's shape is (so conv -> bias/ReLU/add -> conv stays NHWC).
// Views count by their stride order: a channel slice of a channels-last tensor (what cat's
// backward hands out) is not dense, but its NHWC order should still decide.
MemoryFormat result_format(const Shape& out, std::initializer_list<const Tensor*> ins) {
  if (out.size() != 4) return MemoryFormat::contiguous;
  for (const Tensor* t : ins) {
    if (t->sizes() != out) continue;
    if (t->suggest_memory_format() == MemoryFormat::channels_last) return MemoryFormat::channels_last;
    const Shape& st = t->strides();
    const bool nhwc_order = out[1] > 1 && st[1] == 1 && st[3] >= out[1] && st[2] >= st[3] * out[3] &&
                            st[0] >= st[2] * out[2] && !t->is_contiguous();
    return nhwc_order ? MemoryFormat::channels_last : MemoryFormat::contiguous;
  }
  return MemoryFormat::contiguous;
}

// PyTorch's categories of type promotion: boolean < integer < floating point.
int category(DType t) { return t == DType::boolean ? 0 : is_floating(t) ? 2 : 1; }

[[noreturn]] void throw_dtype(const char* op, DType t) {
  if (t == DType::boolean)
    KILN_THROW(op, ": dtype bool is not supported (logical_and, logical_or, logical_xor, logical_not and the "
               "comparisons take booleans; or convert with .to(int64))");
  KILN_THROW(op, ": dtype ", t, " is not supported (integer tensors take add, sub, mul, maximum, minimum, neg, abs, "
             "sign, square, relu, clamp and the comparisons; convert with .to(float32))");
}

// The tensor a tensor-scalar op computes on (PyTorch's promotion with a number): integer and
// boolean tensors become float32 with a floating-point scalar; boolean becomes int64 otherwise.
Tensor scalar_operand(const Tensor& a, const Scalar& s, const char* op) {
  KILN_CHECK(a.defined(), op, ": undefined tensor");
  if (a.is_floating_point()) return a;
  if (s.is_floating_point()) return a.to(DType::float32);
  return a.dtype() == DType::boolean ? a.to(DType::int64) : a;
}

Scalar negated(const Scalar& s) { return s.is_floating_point() ? Scalar(-s.to_double()) : Scalar(-s.to_int64()); }

}  // namespace

namespace ops {

DType result_type(const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.defined() && b.defined(), "result_type: undefined tensor operand");
  const bool za = a.dim() == 0, zb = b.dim() == 0;
  if (za == zb) return promote_types(a.dtype(), b.dtype());
  // A zero-dim operand decides only when of a higher category than the dimensioned one.
  const Tensor& dimmed = za ? b : a;
  const Tensor& zero = za ? a : b;
  return category(zero.dtype()) > category(dimmed.dtype()) ? zero.dtype() : dimmed.dtype();
}

DType result_type(const Tensor& a, const Scalar& s) {
  KILN_CHECK(a.defined(), "result_type: undefined tensor operand");
  return category(s.dtype()) > category(a.dtype()) ? s.dtype() : a.dtype();
}

namespace {
// The operands of a public binary op in their common dtype, on one device.
void promote(const Tensor& a0, const Tensor& b0, const char* op, Tensor& a, Tensor& b) {
  KILN_CHECK(a0.defined() && b0.defined(), op, ": undefined tensor operand");
  KILN_CHECK(a0.device() == b0.device(), op, ": device mismatch, ", a0.device(), " vs ", b0.device());
  const DType t = result_type(a0, b0);
  a = a0.to(t);
  b = b0.to(t);
}

Tensor scalar_tensor_like(const Scalar& s, const Tensor& like) {
  return full({}, s.to_double(), TensorOptions(s.dtype()).with_device(like.device()));
}
}  // namespace

Tensor unary_raw(int op, const Tensor& x, double alpha) {
  KILN_CHECK(x.defined(), unary_op_name(UnaryOp(op)), ": undefined tensor");
  if (!x.is_floating_point()) {
    // Integers keep their dtype where the op is exact on them; elsewhere (exp, sigmoid, ...) they
    // compute in float32, as PyTorch's integer-to-float promotion does.
    if (!integer_unary_op(UnaryOp(op))) return unary_raw(op, x.to(DType::float32), alpha);
    if (x.dtype() == DType::boolean) throw_dtype(unary_op_name(UnaryOp(op)), x.dtype());
  }
  Tensor y = empty(x.sizes(), TensorOptions(x.dtype()).with_device(x.device()), result_format(x.sizes(), {&x}));
  UnaryDesc d;
  d.op = UnaryOp(op);
  d.dtype = x.dtype();
  d.alpha = alpha;
  d.loop = make_loop(y, {&x});
  auto& table = op_table<kernel_op::unary>();
  // Half types go through float32 copies unless a kernel computes them in place (bfloat16 on
  // the native CPU kernels).
  if (is_half(x.dtype()) && !table.find(x.device().type, d))
    return unary_raw(op, x.to(DType::float32), alpha).to(x.dtype());
  table(x.device().type, d, x.data_ptr(), y.data_ptr());
  return y;
}

Tensor binary_raw(int op, const Tensor& a, const Tensor& b, double alpha) {
  const char* name = binary_op_name(BinaryOp(op));
  check_pair(a, b, name);
  if (!a.is_floating_point() && (a.dtype() == DType::boolean || !integer_binary_op(BinaryOp(op))))
    throw_dtype(name, a.dtype());
  const Shape out = broadcast_shapes(a.sizes(), b.sizes(), name);
  Tensor y = empty(out, TensorOptions(a.dtype()).with_device(a.device()), result_format(out, {&a, &b}));
  BinaryDesc d;
  d.op = BinaryOp(op);
  d.dtype = a.dtype();
  d.alpha = alpha;
  d.loop = make_loop(y, {&a, &b});
  auto& table = op_table<kernel_op::binary>();
  if (is_half(a.dtype()) && !table.find(a.device().type, d))
    return binary_raw(op, a.to(DType::float32), b.to(DType::float32), alpha).to(a.dtype());
  table(a.device().type, d, a.data_ptr(), b.data_ptr(), y.data_ptr());
  return y;
}

Tensor compare_raw(int op, const Tensor& a, const Tensor& b) {
  const char* name = compare_op_name(CompareOp(op));
  check_pair(a, b, name);
  const Shape out = broadcast_shapes(a.sizes(), b.sizes(), name);
  Tensor y = empty(out, TensorOptions(DType::boolean).with_device(a.device()), result_format(out, {&a, &b}));
  CompareDesc d;
  d.op = CompareOp(op);
  d.dtype = a.dtype();
  d.loop = make_loop(y, {&a, &b});
  dispatch<kernel_op::compare>(a.device().type, d, a.data_ptr(), b.data_ptr(), y.data_ptr());
  return y;
}

Tensor sum_to(const Tensor& t, const Shape& shape) {
  if (t.sizes() == shape) return t;
  const int64_t lead = t.dim() - int64_t(shape.size());
  KILN_CHECK(lead >= 0, "sum_to: cannot reduce ", shape_str(t.sizes()), " to ", shape_str(shape));
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (d < lead || (shape[d - lead] == 1 && t.size(d) != 1)) dims.push_back(d);
  Tensor s = dims.empty() ? t : sum(t, dims, /*keepdim=*/true);
  return s.reshape(shape);
}

#define KILN_U(op) int(UnaryOp::op)
#define KILN_B(op) int(BinaryOp::op)

Tensor add(const Tensor& a0, const Tensor& b0) {
  return graph::call(GraphOp::add, {a0, b0}, graph::no_attrs, [](const Tensor* in) {
    Tensor a, b;
    promote(in[0], in[1], "add", a, b);
    if (a.dtype() == DType::boolean) return logical_or(a, b);  // PyTorch: + and max are "or" on booleans
    Tensor y = binary_raw(KILN_B(add), a, b);
    autograd::record_fn("AddBackward", {a, b}, {&y}, [as = a.sizes(), bs = b.sizes()](std::vector<Tensor>& g) {
      return std::vector<Tensor>{sum_to(g[0], as), sum_to(g[0], bs)};
    });
    return y;
  });
}

Tensor sub(const Tensor& a0, const Tensor& b0) {
  Tensor a, b;
  promote(a0, b0, "sub", a, b);
  Tensor y = binary_raw(KILN_B(sub), a, b);
  autograd::record_fn("SubBackward", {a, b}, {&y}, [as = a.sizes(), bs = b.sizes()](std::vector<Tensor>& g) {
    return std::vector<Tensor>{sum_to(g[0], as), sum_to(neg(g[0]), bs)};
  });
  return y;
}

Tensor mul(const Tensor& a0, const Tensor& b0) {
  Tensor a, b;
  promote(a0, b0, "mul", a, b);
  if (a.dtype() == DType::boolean) return logical_and(a, b);  // PyTorch: * and min are "and" on booleans
  Tensor y = binary_raw(KILN_B(mul), a, b);
  autograd::record_fn("MulBackward", {a, b}, {&y}, [a, b](std::vector<Tensor>& g) {
    Tensor ga = a.requires_grad() ? sum_to(binary_raw(KILN_B(mul), g[0], b), a.sizes()) : Tensor();
    Tensor gb = b.requires_grad() ? sum_to(binary_raw(KILN_B(mul), g[0], a), b.sizes()) : Tensor();
    return std::vector<Tensor>{ga, gb};
  });
  return y;
}

Tensor div(const Tensor& a0, const Tensor& b0) {
  Tensor a, b;
  promote(a0, b0, "div", a, b);
  if (!is_floating(a.dtype())) {  // true division, as PyTorch's: integers divide in float32
    a = a.to(DType::float32);
    b = b.to(DType::float32);
  }
  Tensor y = binary_raw(KILN_B(div), a, b);
  autograd::record_fn("DivBackward", {a, b}, {&y}, [a, b, y = y.detach()](std::vector<Tensor>& g) {
    Tensor ga = a.requires_grad() ? sum_to(binary_raw(KILN_B(div), g[0], b), a.sizes()) : Tensor();
    Tensor gb;
    if (b.requires_grad())  // d(a/b)/db = -y/b
      gb = sum_to(neg(binary_raw(KILN_B(div), binary_raw(KILN_B(mul), g[0], y), b)), b.sizes());
    return std::vector<Tensor>{ga, gb};
  });
  return y;
}

static Tensor select_grad(const Tensor& g, const Tensor& a, const Tensor& b, bool pick_a_when_ge) {
  // Gradient goes to the chosen operand; ties go to `a` (maximum) like a stable choice.
  Tensor mask = binary_raw(pick_a_when_ge ? KILN_B(ge) : KILN_B(le), a, b);
  return binary_raw(KILN_B(mul), g, mask);
}

Tensor maximum(const Tensor& a0, const Tensor& b0) {
  Tensor a, b;
  promote(a0, b0, "maximum", a, b);
  if (a.dtype() == DType::boolean) return logical_or(a, b);  // PyTorch: + and max are "or" on booleans
  Tensor y = binary_raw(KILN_B(maximum), a, b);
  autograd::record_fn("MaximumBackward", {a, b}, {&y}, [a, b](std::vector<Tensor>& g) {
    Tensor ga = select_grad(g[0], a, b, true);
    Tensor gb = binary_raw(KILN_B(sub), g[0].expand(ga.sizes()), ga);
    return std::vector<Tensor>{sum_to(ga, a.sizes()), sum_to(gb, b.sizes())};
  });
  return y;
}

Tensor minimum(const Tensor& a0, const Tensor& b0) {
  Tensor a, b;
  promote(a0, b0, "minimum", a, b);
  if (a.dtype() == DType::boolean) return logical_and(a, b);  // PyTorch: * and min are "and" on booleans
  Tensor y = binary_raw(KILN_B(minimum), a, b);
  autograd::record_fn("MinimumBackward", {a, b}, {&y}, [a, b](std::vector<Tensor>& g) {
    Tensor ga = select_grad(g[0], a, b, false);
    Tensor gb = binary_raw(KILN_B(sub), g[0].expand(ga.sizes()), ga);
    return std::vector<Tensor>{sum_to(ga, a.sizes()), sum_to(gb, b.sizes())};
  });
  return y;
}

Tensor pow(const Tensor& a0, const Tensor& b0) {
  Tensor a, b;
  promote(a0, b0, "pow", a, b);
  Tensor y = binary_raw(KILN_B(pow), a, b);
  autograd::record_fn("PowBackward", {a, b}, {&y}, [a, b, y = y.detach()](std::vector<Tensor>& g) {
    Tensor ga, gb;
    if (a.requires_grad()) {  // b * a^(b-1) = b * y / a
      ga = sum_to(binary_raw(KILN_B(mul), g[0], binary_raw(KILN_B(div), binary_raw(KILN_B(mul), b, y), a)), a.sizes());
    }
    if (b.requires_grad()) gb = sum_to(binary_raw(KILN_B(mul), g[0], binary_raw(KILN_B(mul), y, unary_raw(KILN_U(log), a))), b.sizes());
    return std::vector<Tensor>{ga, gb};
  });
  return y;
}

Tensor add(const Tensor& a0, const Scalar& s) {
  const Tensor a = scalar_operand(a0, s, "add");
  Tensor y = unary_raw(KILN_U(add_scalar), a, s.to_double());
  autograd::record_fn("AddScalarBackward", {a}, {&y}, [](std::vector<Tensor>& g) { return std::vector<Tensor>{g[0]}; });
  return y;
}

Tensor mul(const Tensor& a0, const Scalar& s0) {
  const Tensor a = scalar_operand(a0, s0, "mul");
  const double s = s0.to_double();
  Tensor y = unary_raw(KILN_U(mul_scalar), a, s);
  autograd::record_fn("MulScalarBackward", {a}, {&y}, [s](std::vector<Tensor>& g) {
    return std::vector<Tensor>{unary_raw(KILN_U(mul_scalar), g[0], s)};
  });
  return y;
}

Tensor pow(const Tensor& a, double p) {
  Tensor y = unary_raw(KILN_U(pow_scalar), a, p);
  autograd::record_fn("PowScalarBackward", {a}, {&y}, [a, p](std::vector<Tensor>& g) {
    Tensor d = unary_raw(KILN_U(mul_scalar), unary_raw(KILN_U(pow_scalar), a, p - 1), p);
    return std::vector<Tensor>{binary_raw(KILN_B(mul), g[0], d)};
  });
  return y;
}

// clamp_min / clamp_max / clamp: the gradient passes where the input is inside the bounds (at a
// bound too, as PyTorch's).
Tensor clamp_min(const Tensor& a0, const Scalar& lo0) {
  const Tensor a = scalar_operand(a0, lo0, "clamp_min");
  const double lo = lo0.to_double();
  Tensor y = unary_raw(KILN_U(clamp_min), a, lo);
  autograd::record_fn("ClampMinBackward", {a}, {&y}, [a, lo](std::vector<Tensor>& g) {
    Tensor mask = binary_raw(KILN_B(ge), a, full({}, lo, TensorOptions(a.dtype()).with_device(a.device())));
    return std::vector<Tensor>{binary_raw(KILN_B(mul), g[0], mask)};
  });
  return y;
}

Tensor clamp_max(const Tensor& a0, const Scalar& hi0) {
  const Tensor a = scalar_operand(a0, hi0, "clamp_max");
  const double hi = hi0.to_double();
  Tensor y = unary_raw(KILN_U(clamp_max), a, hi);
  autograd::record_fn("ClampMaxBackward", {a}, {&y}, [a, hi](std::vector<Tensor>& g) {
    Tensor mask = binary_raw(KILN_B(le), a, full({}, hi, TensorOptions(a.dtype()).with_device(a.device())));
    return std::vector<Tensor>{binary_raw(KILN_B(mul), g[0], mask)};
  });
  return y;
}

Tensor clamp(const Tensor& a0, const Scalar& lo, const Scalar& hi) {
  KILN_CHECK(!(lo.to_double() > hi.to_double()), "clamp: min ", lo.to_double(), " is greater than max ", hi.to_double());
  const Tensor a = scalar_operand(scalar_operand(a0, lo, "clamp"), hi, "clamp");
  Tensor y = unary_raw(KILN_U(clamp_max), unary_raw(KILN_U(clamp_min), a, lo.to_double()), hi.to_double());
  autograd::record_fn("ClampBackward", {a}, {&y}, [a, lo = lo.to_double(), hi = hi.to_double()](std::vector<Tensor>& g) {
    const TensorOptions o = TensorOptions(a.dtype()).with_device(a.device());
    Tensor inside = binary_raw(KILN_B(mul), binary_raw(KILN_B(ge), a, full({}, lo, o)), binary_raw(KILN_B(le), a, full({}, hi, o)));
    return std::vector<Tensor>{binary_raw(KILN_B(mul), g[0], inside)};
  });
  return y;
}

Tensor neg(const Tensor& x) {
  KILN_CHECK(x.defined(), "neg: undefined tensor");
  if (!x.is_floating_point()) return unary_raw(KILN_U(neg), x);  // integers stay integers (wrapping); bool refused
  return mul(x, -1.0);
}

Tensor abs(const Tensor& x) {
  Tensor y = unary_raw(KILN_U(abs), x);
  autograd::record_fn("AbsBackward", {x}, {&y}, [x](std::vector<Tensor>& g) {
    return std::vector<Tensor>{binary_raw(KILN_B(mul), g[0], unary_raw(KILN_U(sign), x))};
  });
  return y;
}

Tensor exp(const Tensor& x) {
  Tensor y = unary_raw(KILN_U(exp), x);
  autograd::record_fn("ExpBackward", {x}, {&y}, [y = y.detach()](std::vector<Tensor>& g) {
    return std::vector<Tensor>{binary_raw(KILN_B(mul), g[0], y)};
  });
  return y;
}

Tensor log(const Tensor& x) {
  Tensor y = unary_raw(KILN_U(log), x);
  autograd::record_fn("LogBackward", {x}, {&y}, [x](std::vector<Tensor>& g) {
    return std::vector<Tensor>{binary_raw(KILN_B(div), g[0], x)};
  });
  return y;
}

Tensor sqrt(const Tensor& x) {
  Tensor y = unary_raw(KILN_U(sqrt), x);
  autograd::record_fn("SqrtBackward", {x}, {&y}, [y = y.detach()](std::vector<Tensor>& g) {
    return std::vector<Tensor>{unary_raw(KILN_U(mul_scalar), binary_raw(KILN_B(div), g[0], y), 0.5)};
  });
  return y;
}

Tensor rsqrt(const Tensor& x) { return pow(x, -0.5); }
Tensor square(const Tensor& x) {
  Tensor y = unary_raw(KILN_U(square), x);
  autograd::record_fn("SquareBackward", {x}, {&y}, [x](std::vector<Tensor>& g) {
    return std::vector<Tensor>{unary_raw(KILN_U(mul_scalar), binary_raw(KILN_B(mul), g[0], x), 2.0)};
  });
  return y;
}
Tensor reciprocal(const Tensor& x) { return pow(x, -1.0); }

Tensor relu(const Tensor& x) {
  return graph::call(GraphOp::relu, {x}, graph::no_attrs, [](const Tensor* in) {
    Tensor y = unary_raw(KILN_U(relu), in[0]);
    autograd::record_fn("ReluBackward", {in[0]}, {&y}, [y = y.detach()](std::vector<Tensor>& g) {
      return std::vector<Tensor>{binary_raw(KILN_B(relu_bwd), g[0], y)};  // y > 0 iff x > 0
    });
    return y;
  });
}

Tensor leaky_relu(const Tensor& x, double slope) {
  return graph::call(
      GraphOp::leaky_relu, {x}, [&] { return std::vector<trace::Attr>{trace::real("slope", slope)}; },
      [slope](const Tensor* in) {
        Tensor y = unary_raw(KILN_U(leaky_relu), in[0], slope);
        autograd::record_fn("LeakyReluBackward", {in[0]}, {&y}, [x = in[0], slope](std::vector<Tensor>& g) {
          return std::vector<Tensor>{binary_raw(KILN_B(leaky_relu_bwd), g[0], x, slope)};
        });
        return y;
      });
}

Tensor sigmoid(const Tensor& x) {
  return graph::call(GraphOp::sigmoid, {x}, graph::no_attrs, [](const Tensor* in) {
    Tensor y = unary_raw(KILN_U(sigmoid), in[0]);
    autograd::record_fn("SigmoidBackward", {in[0]}, {&y}, [y = y.detach()](std::vector<Tensor>& g) {
      return std::vector<Tensor>{binary_raw(KILN_B(sigmoid_bwd), g[0], y)};
    });
    return y;
  });
}

Tensor tanh(const Tensor& x) {
  return graph::call(GraphOp::tanh, {x}, graph::no_attrs, [](const Tensor* in) {
    Tensor y = unary_raw(KILN_U(tanh), in[0]);
    autograd::record_fn("TanhBackward", {in[0]}, {&y}, [y = y.detach()](std::vector<Tensor>& g) {
      return std::vector<Tensor>{binary_raw(KILN_B(tanh_bwd), g[0], y)};
    });
    return y;
  });
}

Tensor gelu(const Tensor& x) {
  Tensor y = unary_raw(KILN_U(gelu), x);
  autograd::record_fn("GeluBackward", {x}, {&y}, [x](std::vector<Tensor>& g) {
    return std::vector<Tensor>{binary_raw(KILN_B(gelu_bwd), g[0], x)};
  });
  return y;
}

namespace {
Tensor compare(CompareOp op, const Tensor& a0, const Tensor& b0) {
  Tensor a, b;
  promote(a0, b0, compare_op_name(op), a, b);
  return compare_raw(int(op), a, b);
}
}  // namespace

Tensor eq(const Tensor& a, const Tensor& b) { return compare(CompareOp::eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare(CompareOp::ne, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare(CompareOp::gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare(CompareOp::ge, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare(CompareOp::lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return compare(CompareOp::le, a, b); }
Tensor eq(const Tensor& a, const Scalar& s) { return compare(CompareOp::eq, a, scalar_tensor_like(s, a)); }
Tensor ne(const Tensor& a, const Scalar& s) { return compare(CompareOp::ne, a, scalar_tensor_like(s, a)); }
Tensor gt(const Tensor& a, const Scalar& s) { return compare(CompareOp::gt, a, scalar_tensor_like(s, a)); }
Tensor ge(const Tensor& a, const Scalar& s) { return compare(CompareOp::ge, a, scalar_tensor_like(s, a)); }
Tensor lt(const Tensor& a, const Scalar& s) { return compare(CompareOp::lt, a, scalar_tensor_like(s, a)); }
Tensor le(const Tensor& a, const Scalar& s) { return compare(CompareOp::le, a, scalar_tensor_like(s, a)); }
Tensor logical_and(const Tensor& a, const Tensor& b) { return compare(CompareOp::logical_and, a, b); }
Tensor logical_or(const Tensor& a, const Tensor& b) { return compare(CompareOp::logical_or, a, b); }
Tensor logical_xor(const Tensor& a, const Tensor& b) { return compare(CompareOp::logical_xor, a, b); }
Tensor logical_not(const Tensor& x) {
  KILN_CHECK(x.defined(), "logical_not: undefined tensor");
  return compare_raw(int(CompareOp::eq), x, full({}, 0, TensorOptions(x.dtype()).with_device(x.device())));
}

#undef KILN_U
#undef KILN_B

namespace {

Tensor add_n_body(const std::vector<Tensor>& xs) {
  KILN_CHECK(!xs.empty(), "add_n: expected a non-empty list of tensors");
  for (size_t i = 0; i < xs.size(); ++i) {
    KILN_CHECK(xs[i].defined(), "add_n: tensor ", i, " is undefined");
    KILN_CHECK(xs[i].sizes() == xs[0].sizes() && xs[i].dtype() == xs[0].dtype() && xs[i].device() == xs[0].device(),
               "add_n: tensor ", i, " is ", xs[i].dtype(), " ", shape_str(xs[i].sizes()), " on ", xs[i].device(),
               " but tensor 0 is ", xs[0].dtype(), " ", shape_str(xs[0].sizes()), " on ", xs[0].device(),
               "; all must match");
  }
  const Tensor& x0 = xs[0];
  SumDesc d;
  d.dtype = x0.dtype();
  d.n = x0.numel();
  d.inputs = int64_t(xs.size());
  Tensor y;
  if (x0.device().type == DeviceType::cpu && (d.dtype == DType::float32 || d.dtype == DType::float64)) {
    // Inputs that share one dense layout keep it; others are made contiguous.
    const MemoryFormat f = x0.dim() == 4 ? x0.suggest_memory_format() : MemoryFormat::contiguous;
    std::vector<Tensor> keep;
    std::vector<const void*> srcs;
    for (const Tensor& x : xs) {
      keep.push_back(x.is_contiguous(f) ? x.detach() : x.detach().contiguous(f));
      srcs.push_back(keep.back().data_ptr());
    }
    y = empty(x0.sizes(), TensorOptions(x0.dtype()).with_device(x0.device()), f);
    if (d.n > 0) dispatch<kernel_op::sum>(DeviceType::cpu, d, srcs.data(), y.data_ptr());
  } else {
    NoGradGuard ng;
    y = x0.detach();
    for (size_t i = 1; i < xs.size(); ++i) y = add(y, xs[i].detach());
    if (xs.size() == 1) y = y.clone();
  }
  autograd::record_fn("AddNBackward", xs, {&y}, [k = xs.size()](std::vector<Tensor>& g) {
    return std::vector<Tensor>(k, g[0]);
  });
  return y;
}

}  // namespace

Tensor add_n(const std::vector<Tensor>& xs) {
  return graph::call(GraphOp::add_n, xs, graph::no_attrs, [&](const Tensor*) { return add_n_body(xs); });
}

}  // namespace ops

Tensor operator+(const Tensor& a, const Tensor& b) { return ops::add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return ops::sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return ops::mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return ops::div(a, b); }
Tensor operator-(const Tensor& a) { return ops::neg(a); }
Tensor operator+(const Tensor& a, const Scalar& s) { return ops::add(a, s); }
Tensor operator-(const Tensor& a, const Scalar& s) { return ops::add(a, negated(s)); }
Tensor operator*(const Tensor& a, const Scalar& s) { return ops::mul(a, s); }
Tensor operator/(const Tensor& a, const Scalar& s) {
  KILN_CHECK(a.defined(), "div: undefined tensor");
  return ops::mul(a.is_floating_point() ? a : a.to(DType::float32), 1.0 / s.to_double());  // true division
}
Tensor operator+(const Scalar& s, const Tensor& a) { return ops::add(a, s); }
Tensor operator-(const Scalar& s, const Tensor& a) { return ops::add(ops::neg(a), s); }
Tensor operator*(const Scalar& s, const Tensor& a) { return ops::mul(a, s); }
Tensor operator==(const Tensor& a, const Tensor& b) { return ops::eq(a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return ops::ne(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return ops::gt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ops::ge(a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return ops::lt(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return ops::le(a, b); }
Tensor operator==(const Tensor& a, const Scalar& s) { return ops::eq(a, s); }
Tensor operator!=(const Tensor& a, const Scalar& s) { return ops::ne(a, s); }
Tensor operator>(const Tensor& a, const Scalar& s) { return ops::gt(a, s); }
Tensor operator>=(const Tensor& a, const Scalar& s) { return ops::ge(a, s); }
Tensor operator<(const Tensor& a, const Scalar& s) { return ops::lt(a, s); }
Tensor operator<=(const Tensor& a, const Scalar& s) { return ops::le(a, s); }


}  // namespace kiln
