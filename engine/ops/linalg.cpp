// matmul and linear: argument checks, operand layouts for the GEMM, autograd, and the
// registration of the "gemm" op (native first, then ref).
//   ctest --test-dir build -R "test_gemm|test_linalg_grad|test_linear_layers"
#include "engine/ops/linalg.h"

#include <algorithm>
#include <utility>

#include "engine/autograd.h"
#include "engine/dispatch.h"
#include "engine/ops/reduce.h"
#include "engine/graph_op.h"
#include "kernels/common/gemm.h"
#include "kernels/common/linear.h"

namespace kiln {
namespace {

// One GEMM operand: a logical [batch x] rows x cols matrix as stored in memory.
struct Mat {
  Tensor keep;  // detached; owns the memory
  const void* ptr = nullptr;
  bool trans = false;  // stored as cols x rows (row-major), i.e. a transposed view
  int64_t ld = 1, bstride = 0, rows = 0, cols = 0;
  Mat t() const {
    Mat r = *this;
    r.trans = !trans;
    std::swap(r.rows, r.cols);
    return r;
  }
};

// Row-major (trans false) or column-major (trans true) with leading dim ld, from the strides
// (s0, s1) of an r x c matrix; false when neither (overlapping rows, a broadcast, a step).
bool layout_of(int64_t r, int64_t c, int64_t s0, int64_t s1, bool& trans, int64_t& ld) {
  if ((c <= 1 || s1 == 1) && (r <= 1 || s0 >= std::max<int64_t>(c, 1))) {
    trans = false;
    ld = r <= 1 ? std::max<int64_t>(c, 1) : s0;
    return true;
  }
  if ((r <= 1 || s0 == 1) && (c <= 1 || s1 >= std::max<int64_t>(r, 1))) {
    trans = true;
    ld = c <= 1 ? std::max<int64_t>(r, 1) : s1;
    return true;
  }
  return false;
}

// t: 2-d or 3-d, not empty, no autograd history needed (detached).
Mat make_mat(Tensor t) {
  const int64_t d = t.dim();
  Mat m;
  m.rows = t.size(d - 2);
  m.cols = t.size(d - 1);
  if (!layout_of(m.rows, m.cols, t.stride(d - 2), t.stride(d - 1), m.trans, m.ld)) {
    t = t.contiguous();
    layout_of(m.rows, m.cols, t.stride(d - 2), t.stride(d - 1), m.trans, m.ld);
  }
  m.bstride = d == 3 && t.size(0) > 1 ? t.stride(0) : 0;
  m.keep = t;
  m.ptr = t.data_ptr();
  return m;
}

// c[batch x a.rows x b.cols] (contiguous) = a @ b + beta * c.
void run_gemm(const Mat& a, const Mat& b, Tensor& c, int64_t batch, double beta = 0.0) {
  GemmDesc d;
  d.dtype = c.dtype();
  d.trans_a = a.trans;
  d.trans_b = b.trans;
  d.m = a.rows;
  d.n = b.cols;
  d.k = a.cols;
  d.lda = a.ld;
  d.ldb = b.ld;
  d.ldc = std::max<int64_t>(d.n, 1);
  d.beta = beta;
  d.batch = batch;
  d.stride_a = a.bstride;
  d.stride_b = b.bstride;
  d.stride_c = d.m * d.n;
  if (d.m == 0 || d.n == 0 || batch == 0) return;
  if (d.k == 0) {  // an empty sum: only the beta * c part
    if (beta == 0.0) c.zero_();
    return;
  }
  dispatch<kernel_op::gemm>(c.device().type, d, a.ptr, b.ptr, c.data_ptr());
}

// dtype and device of results; captured by backward instead of a tensor, which would keep its
// storage alive.
struct Kind {
  DType dtype;
  Device device;
  explicit Kind(const Tensor& t) : dtype(t.dtype()), device(t.device()) {}
  TensorOptions opts() const { return TensorOptions(dtype).with_device(device); }
};

Tensor mat_product(const Mat& a, const Mat& b, const Shape& out_shape, int64_t batch, const Kind& kind) {
  Tensor c = empty(out_shape, kind.opts());
  run_gemm(a, b, c, batch);
  return c;
}


void check_operands(const char* op, const Tensor& a, const Tensor& b, const char* an, const char* bn) {
  KILN_CHECK(a.defined() && b.defined(), op, ": undefined ", a.defined() ? bn : an);
  KILN_CHECK(a.dtype() == b.dtype(), op, ": dtype mismatch, ", a.dtype(), " ", shape_str(a.sizes()), " vs ",
             b.dtype(), " ", shape_str(b.sizes()));
  KILN_CHECK(a.is_floating_point(), op, ": needs floating-point operands, got ", a.dtype());
  KILN_CHECK(a.device() == b.device(), op, ": device mismatch, ", a.device(), " vs ", b.device());
}

Tensor matmul_body(const Tensor& a, const Tensor& b);

}  // namespace

namespace ops {

Tensor matmul(const Tensor& a, const Tensor& b) {
  check_operands("matmul", a, b, "a", "b");
  return graph::call(GraphOp::matmul, {a, b}, graph::no_attrs,
                     [](const Tensor* in) { return matmul_body(in[0], in[1]); });
}

}  // namespace ops

namespace {

Tensor matmul_body(const Tensor& a, const Tensor& b) {
  // (Messages are built only on failure.)
#define KILN_SHAPES "matmul: ", shape_str(a.sizes()), " @ ", shape_str(b.sizes())
  KILN_CHECK((a.dim() == 2 && b.dim() == 2) || (a.dim() == 3 && (b.dim() == 2 || b.dim() == 3)), KILN_SHAPES,
             ": expects [m, k] @ [k, n], [B, m, k] @ [B, k, n] or [B, m, k] @ [k, n]");
  const int64_t k = a.size(-1), kb = b.size(-2);
  KILN_CHECK(k == kb, KILN_SHAPES, ": inner dims ", k, " and ", kb, " differ");
  const int64_t m = a.size(-2), n = b.size(-1);
  const bool batched = a.dim() == 3 && b.dim() == 3;
  const bool shared_b = a.dim() == 3 && b.dim() == 2;
  const int64_t batch = a.dim() == 3 ? a.size(0) : 1;
  if (batched)
    KILN_CHECK(b.size(0) == batch, KILN_SHAPES, ": batch sizes ", batch, " and ", b.size(0), " differ");
#undef KILN_SHAPES
  Shape out_shape = a.dim() == 3 ? Shape{batch, m, n} : Shape{m, n};

  Tensor y;
  Mat A, B;
  if (batch * m * n == 0 || k == 0) {
    y = zeros(out_shape, TensorOptions(a.dtype()).with_device(a.device()));
  } else if (shared_b) {
    // [B, m, k] @ [k, n] is one [B*m, k] @ [k, n] GEMM (A copied first if it does not flatten).
    A = make_mat(a.detach().reshape({batch * m, k}));
    B = make_mat(b.detach());
    y = mat_product(A, B, out_shape, 1, Kind(a));
  } else {
    A = make_mat(a.detach());
    B = make_mat(b.detach());
    y = mat_product(A, B, out_shape, batch, Kind(a));
  }
  autograd::record_fn("MatmulBackward", {a, b}, {&y},
                      [A, B, need_a = a.requires_grad(), need_b = b.requires_grad(), as = a.sizes(), bs = b.sizes(),
                       batch, shared_b, kind = Kind(a)](std::vector<Tensor>& g) {
                        Tensor ga, gb;
                        if (!A.keep.defined()) {  // empty product: zero gradients
                          if (need_a) ga = zeros(as, kind.opts());
                          if (need_b) gb = zeros(bs, kind.opts());
                          return std::vector<Tensor>{ga, gb};
                        }
                        const int64_t m = A.rows, n = B.cols;
                        // dA = G B^T, dB = A^T G (per batch; summed over the batch when B is shared).
                        Mat G = make_mat(shared_b ? g[0].detach().reshape({m, n}) : g[0].detach());
                        const int64_t nb = shared_b ? 1 : batch;
                        if (need_a) ga = mat_product(G, B.t(), shared_b ? Shape{m, A.cols} : as, nb, kind).view(as);
                        if (need_b) gb = mat_product(A.t(), G, bs, nb, kind);
                        return std::vector<Tensor>{ga, gb};
                      });
  return y;
}

}  // namespace

namespace ops {

namespace {
// Whether a half-type inner product runs in its own type on `dev`: where forward and both
// backward passes have a candidate (CUDA: cuBLAS or kiln's kernels; CPU: native's bfloat16
// GEMM, float32 sums rounded once, as the float32 copies would give up to summation order).
Tensor linear_body(const Tensor& x, const Tensor& weight, const Tensor& bias);

bool half_linear_runs(DeviceType dev, const LinearDesc& d) {
  return find_kernel<kernel_op::linear_fwd>(dev, d) &&
         find_kernel<kernel_op::linear_bwd_data>(dev, d) &&
         find_kernel<kernel_op::linear_bwd_weights>(dev, d);
}
}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  return graph::call(GraphOp::linear, {x, weight, bias}, graph::no_attrs,
                     [](const Tensor* in) { return linear_body(in[0], in[1], in[2]); });
}

namespace {
Tensor linear_body(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_operands("linear", x, weight, "input", "weight");
  KILN_CHECK(weight.dim() == 2, "linear: weight must be 2-d [out, in], got ", shape_str(weight.sizes()));
  KILN_CHECK(x.dim() >= 1, "linear: input must have at least 1 dim, got ", shape_str(x.sizes()));
  const int64_t out = weight.size(0), in = weight.size(1);
  KILN_CHECK(x.size(-1) == in, "linear: input ", shape_str(x.sizes()), " has ", x.size(-1), " features but weight ",
             shape_str(weight.sizes()), " expects ", in);
  if (bias.defined()) {
    KILN_CHECK(bias.dtype() == x.dtype(), "linear: bias dtype ", bias.dtype(), " differs from input dtype ", x.dtype());
    KILN_CHECK(bias.dim() == 1 && bias.size(0) == out, "linear: bias ", shape_str(bias.sizes()),
               " does not match weight ", shape_str(weight.sizes()), " (expects [", out, "])");
  }
  int64_t rows = 1;  // the leading dims, flattened
  for (int64_t d = 0; d + 1 < x.dim(); ++d) rows *= x.size(d);
  Shape out_shape = x.sizes();
  out_shape.back() = out;
  // One dispatch per pass ("linear_fwd", "linear_bwd_data", "linear_bwd_weights"): the inner
  // product takes contiguous row-major operands, so strided inputs are copied once here.
  LinearDesc d;
  d.dtype = x.dtype();
  d.n = rows;
  d.ic = in;
  d.oc = out;
  d.has_bias = bias.defined();
  // Half types run as they are where every pass has a candidate (cuBLAS, float32 accumulation on
  // tensor cores; native bfloat16 on the CPU); otherwise graph::call runs it on float32 copies.
  if (is_half(x.dtype()) && !half_linear_runs(x.device().type, d)) return graph::float32_fallback();
  Tensor X = x.detach().reshape({rows, in}).contiguous();
  Tensor W = weight.detach().contiguous();
  Tensor B = bias.defined() ? bias.detach().contiguous() : Tensor();
  Tensor y2 = empty({rows, out}, TensorOptions(x.dtype()).with_device(x.device()));
  dispatch<kernel_op::linear_fwd>(
      x.device().type, d, X.data_ptr(), W.data_ptr(), B.defined() ? B.data_ptr() : nullptr, y2.data_ptr());
  Tensor y = y2.view(out_shape);
  const bool need_x = x.requires_grad(), need_w = weight.requires_grad(), need_b = bias.requires_grad();
  // Keep only what backward reads: the input for the weight gradient, the weight for the input's.
  autograd::record_fn("LinearBackward", {x, weight, bias}, {&y},
                      [d, X = need_w ? X : Tensor(), W = need_x ? W : Tensor(), xs = x.sizes(), need_x, need_w,
                       need_b, kind = Kind(x)](std::vector<Tensor>& g) {
                        Tensor gx, gw, gb;
                        Tensor g2 = g[0].detach().reshape({d.n, d.oc}).contiguous();
                        const DeviceType dev = kind.device.type;
                        if (need_x) {
                          gx = empty({d.n, d.ic}, kind.opts());
                          dispatch<kernel_op::linear_bwd_data>(
                              dev, d, g2.data_ptr(), W.data_ptr(), gx.data_ptr());
                          gx = gx.view(xs);
                        }
                        if (need_w) gw = empty({d.oc, d.ic}, kind.opts());
                        if (need_b) gb = empty({d.oc}, kind.opts());
                        if (need_w || need_b) {
                          LinearDesc db = d;
                          db.has_bias = need_b;
                          dispatch<kernel_op::linear_bwd_weights>(
                              dev, db, need_w ? X.data_ptr() : nullptr, g2.data_ptr(),
                              need_w ? gw.data_ptr() : nullptr, need_b ? gb.data_ptr() : nullptr);
                        }
                        return std::vector<Tensor>{gx, gw, gb};
                      });
  return y;
}
}  // namespace

}  // namespace ops

}  // namespace kiln
