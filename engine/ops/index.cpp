#include "engine/ops/index.h"

#include <algorithm>
#include <string>

#include "engine/autograd.h"
#include "engine/dispatch.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/iter.h"
#include "kernels/common/index.h"

namespace kiln {
namespace {

// x viewed as [outer, n, inner] around dim d.
struct Axis {
  int64_t outer = 1, n = 1, inner = 1;
};
Axis axis_of(const Shape& s, int64_t d) {
  Axis a;
  for (int64_t k = 0; k < int64_t(s.size()); ++k) (k < d ? a.outer : k > d ? a.inner : a.n) *= s[size_t(k)];
  return a;
}

// The index as contiguous int64 on x's device, every value checked against [0, limit) (negative
// ones wrapped first where `wrap`). One host pass over a copy: the kernels never see a bad index.
Tensor checked_index(const Tensor& index, const Tensor& x, int64_t limit, bool wrap, const char* op, int64_t dim) {
  KILN_CHECK(index.defined(), op, ": undefined index tensor");
  KILN_CHECK(index.dtype() == DType::int64 || index.dtype() == DType::int32, op, ": indices must be int64 (or int32), got ",
             index.dtype());
  KILN_CHECK(index.device() == x.device(), op, ": index on ", index.device(), " but the tensor on ", x.device());
  // A copy always: wrapping must not write the caller's tensor.
  Tensor host = index.detach().to(Device()).to(DType::int64).contiguous().clone();
  int64_t* p = host.data<int64_t>();
  for (int64_t i = 0; i < host.numel(); ++i) {
    int64_t v = p[i];
    if (wrap && v < 0) v += limit;
    KILN_CHECK(v >= 0 && v < limit, op, ": index ", p[i], " is out of range for dim ", dim, " of size ", limit,
               " (at position ", i, " of the index)");
    p[i] = v;
  }
  return host.to(x.device());
}

void check_same_except(const Tensor& x, const Tensor& t, int64_t d, const char* op, const char* what) {
  KILN_CHECK(t.dim() == x.dim(), op, ": ", what, " has ", t.dim(), " dims, the tensor ", x.dim());
  for (int64_t k = 0; k < x.dim(); ++k)
    KILN_CHECK(k == d || t.size(k) == x.size(k), op, ": ", what, " is ", shape_str(t.sizes()), " but must match ",
               shape_str(x.sizes()), " except along dim ", d);
}

Tensor run_gather(const Tensor& x, int64_t d, const Tensor& index, bool per_row, const Shape& out_shape) {
  const Tensor xc = x.contiguous();
  const Axis a = axis_of(x.sizes(), d);
  GatherDesc g;
  g.dtype = x.dtype();
  g.outer = a.outer;
  g.src_n = a.n;
  g.inner = a.inner;
  g.idx_n = per_row ? index.numel() : (index.dim() ? index.size(d) : 1);  // gather's index has x's rank
  g.per_row = per_row;
  Tensor y = empty(out_shape, TensorOptions(x.dtype()).with_device(x.device()));
  if (y.numel() > 0) dispatch<kernel_op::gather>(x.device().type, g, xc.data_ptr(), index.data<int64_t>(), y.data_ptr());
  return y;
}

// dst (contiguous, written in place) viewed as [outer, dst_n, inner] along d.
void run_scatter(Tensor& dst, int64_t d, const Tensor& index, const Tensor& src, bool per_row, bool accumulate) {
  const Axis a = axis_of(dst.sizes(), d);
  const Tensor sc = src.to(dst.dtype()).contiguous();
  ScatterDesc s;
  s.dtype = dst.dtype();
  s.outer = a.outer;
  s.dst_n = a.n;
  s.inner = a.inner;
  s.idx_n = per_row ? index.numel() : (sc.dim() ? sc.size(d) : 1);  // src (and index) have dst's rank
  s.per_row = per_row;
  s.accumulate = accumulate;
  dst.bump_version();
  if (sc.numel() > 0 && dst.numel() > 0)
    dispatch<kernel_op::scatter>(dst.device().type, s, sc.data_ptr(), index.data<int64_t>(), dst.data_ptr());
}

Tensor scatter_impl(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, bool add, const char* op) {
  KILN_CHECK(x.defined() && src.defined(), op, ": undefined tensor");
  const int64_t d = wrap_dim(dim, std::max<int64_t>(x.dim(), 1), op);
  KILN_CHECK(index.defined() && index.sizes() == src.sizes(), op, ": index ",
             index.defined() ? shape_str(index.sizes()) : std::string("undefined"), " and src ", shape_str(src.sizes()),
             " must have one shape");
  check_same_except(x, index, d, op, "index");
  KILN_CHECK(src.device() == x.device(), op, ": src on ", src.device(), " but the tensor on ", x.device());
  const Tensor idx = checked_index(index, x, x.dim() ? x.size(d) : 1, false, op, d);
  Tensor y = x.detach().clone();
  {
    NoGradGuard ng;
    run_scatter(y, d, idx, src.detach(), false, add);
  }
  autograd::record_fn(add ? "ScatterAddBackward" : "ScatterBackward", {x, src}, {&y},
                      [d, idx, add, src_dtype = src.dtype()](std::vector<Tensor>& g) {
                        const Tensor gc = g[0].contiguous();
                        Tensor gx = gc;
                        if (!add) {  // the overwritten places get nothing
                          gx = gc.clone();
                          run_scatter(gx, d, idx, zeros(idx.sizes(), TensorOptions(gc.dtype()).with_device(gc.device())),
                                      false, false);
                        }
                        Tensor gs = run_gather(gc, d, idx, false, idx.sizes()).to(src_dtype);
                        return std::vector<Tensor>{gx, gs};
                      });
  return y;
}

}  // namespace

namespace ops {

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  KILN_CHECK(x.defined(), "index_select: undefined tensor");
  KILN_CHECK(index.defined() && index.dim() <= 1, "index_select: the index must be 0-d or 1-d, got ",
             index.defined() ? shape_str(index.sizes()) : std::string("undefined"));
  const int64_t d = wrap_dim(dim, std::max<int64_t>(x.dim(), 1), "index_select");
  const int64_t n = x.dim() ? x.size(d) : 1;
  const Tensor idx = checked_index(index, x, n, false, "index_select", d);
  Shape out = x.sizes();
  if (!out.empty()) out[size_t(d)] = idx.numel();
  Tensor y = run_gather(x.detach(), d, idx, true, out);
  autograd::record_fn("IndexSelectBackward", {x}, {&y}, [d, idx, xs = x.sizes()](std::vector<Tensor>& g) {
    Tensor gx = zeros(xs, TensorOptions(g[0].dtype()).with_device(g[0].device()));
    run_scatter(gx, d, idx, g[0], true, true);
    return std::vector<Tensor>{gx};
  });
  return y;
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  KILN_CHECK(x.defined(), "gather: undefined tensor");
  const int64_t d = wrap_dim(dim, std::max<int64_t>(x.dim(), 1), "gather");
  KILN_CHECK(index.defined(), "gather: undefined index tensor");
  check_same_except(x, index, d, "gather", "index");
  const Tensor idx = checked_index(index, x, x.dim() ? x.size(d) : 1, false, "gather", d);
  Tensor y = run_gather(x.detach(), d, idx, false, index.sizes());
  autograd::record_fn("GatherBackward", {x}, {&y}, [d, idx, xs = x.sizes()](std::vector<Tensor>& g) {
    Tensor gx = zeros(xs, TensorOptions(g[0].dtype()).with_device(g[0].device()));
    run_scatter(gx, d, idx, g[0], false, true);
    return std::vector<Tensor>{gx};
  });
  return y;
}

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return scatter_impl(x, dim, index, src, false, "scatter");
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return scatter_impl(x, dim, index, src, true, "scatter_add");
}

Tensor& index_put_(Tensor& x, const std::vector<Tensor>& indices, const Tensor& values, bool accumulate) {
  const char* op = "index_put_";
  KILN_CHECK(x.defined() && values.defined(), op, ": undefined tensor");
  KILN_CHECK(!(x.requires_grad() && autograd::grad_mode_enabled()), op,
             ": in-place write to a tensor that requires grad (not recorded by autograd); wrap it in NoGradGuard");
  KILN_CHECK(!indices.empty(), op, ": no index tensors");
  KILN_CHECK(values.device() == x.device(), op, ": values on ", values.device(), " but the tensor on ", x.device());
  std::vector<Tensor> idx = indices;
  // A boolean mask of x's leading shape: the coordinates of its true elements (on the host).
  if (idx.size() == 1 && idx[0].defined() && idx[0].dtype() == DType::boolean) {
    const Tensor m = idx[0].to(Device()).contiguous();
    KILN_CHECK(m.dim() >= 1 && m.dim() <= x.dim(), op, ": mask ", shape_str(m.sizes()), " for a tensor ",
               shape_str(x.sizes()));
    for (int64_t k = 0; k < m.dim(); ++k)
      KILN_CHECK(m.size(k) == x.size(k), op, ": mask ", shape_str(m.sizes()), " does not match the leading sizes of ",
                 shape_str(x.sizes()));
    const bool* mp = m.data<bool>();
    const Shape st = contiguous_strides(m.sizes());
    std::vector<std::vector<double>> coords(size_t(m.dim()));
    for (int64_t e = 0; e < m.numel(); ++e)
      if (mp[e])
        for (int64_t k = 0; k < m.dim(); ++k) coords[size_t(k)].push_back(double((e / st[size_t(k)]) % m.size(k)));
    idx.clear();
    for (auto& c : coords)
      idx.push_back(from_vector(c, {int64_t(c.size())}, TensorOptions(DType::int64)).to(x.device()));
  }
  const int64_t k = int64_t(idx.size());
  KILN_CHECK(k <= x.dim(), op, ": ", k, " index tensors for a tensor of ", x.dim(), " dims");
  Shape ishape;
  for (size_t m = 0; m < idx.size(); ++m) {
    KILN_CHECK(idx[m].defined(), op, ": undefined index tensor");
    ishape = m == 0 ? idx[m].sizes() : broadcast_shapes(ishape, idx[m].sizes(), op);
  }
  // The linear position over the first k dims of every indexed element.
  int64_t lead = 1;
  for (int64_t m = 0; m < k; ++m) lead *= x.size(m);
  const int64_t count = shape_numel(ishape);
  std::vector<double> lin(size_t(count), 0.0);
  int64_t scale = 1;
  for (int64_t m = k - 1; m >= 0; --m) {
    const Tensor c = checked_index(idx[size_t(m)].expand(ishape), x, x.size(m), true, op, m).to(Device()).contiguous();
    const int64_t* cp = c.data<int64_t>();
    for (int64_t e = 0; e < count; ++e) lin[size_t(e)] += double(cp[e] * scale);
    scale *= x.size(m);
  }
  Tensor lidx = from_vector(lin, {count}, TensorOptions(DType::int64)).to(x.device());
  // values broadcast to [count, rest...] and x viewed as [lead, rest...].
  Shape rest(x.sizes().begin() + k, x.sizes().end());
  Shape vshape = ishape;
  vshape.insert(vshape.end(), rest.begin(), rest.end());
  Tensor v = values.detach().to(x.dtype()).expand(vshape).contiguous();
  Shape flat = {count};
  flat.insert(flat.end(), rest.begin(), rest.end());
  v = v.reshape(flat);
  Shape xflat = {lead};
  xflat.insert(xflat.end(), rest.begin(), rest.end());
  if (x.is_contiguous()) {
    Tensor xv = x.view(xflat);
    run_scatter(xv, 0, lidx, v, true, accumulate);
    x.bump_version();
  } else {
    Tensor xc = x.detach().contiguous().view(xflat);
    run_scatter(xc, 0, lidx, v, true, accumulate);
    NoGradGuard ng;
    x.copy_(xc.view(x.sizes()));
  }
  return x;
}

Tensor where(const Tensor& cond, const Tensor& a0, const Tensor& b0) {
  KILN_CHECK(cond.defined() && a0.defined() && b0.defined(), "where: undefined tensor");
  KILN_CHECK(cond.dtype() == DType::boolean, "where: the condition must be a boolean tensor, got ", cond.dtype());
  KILN_CHECK(cond.device() == a0.device() && a0.device() == b0.device(), "where: tensors on ", cond.device(), ", ",
             a0.device(), " and ", b0.device());
  const DType t = result_type(a0, b0);
  const Tensor a = a0.to(t), b = b0.to(t);
  const Shape out = broadcast_shapes(broadcast_shapes(cond.sizes(), a.sizes(), "where"), b.sizes(), "where");
  Tensor y = empty(out, TensorOptions(t).with_device(a.device()));
  WhereDesc d;
  d.dtype = t;
  d.loop = make_loop(y, {&cond, &a, &b});
  if (y.numel() > 0) dispatch<kernel_op::where>(a.device().type, d, cond.data_ptr(), a.data_ptr(), b.data_ptr(), y.data_ptr());
  autograd::record_fn("WhereBackward", {a, b}, {&y}, [cond, as = a.sizes(), bs = b.sizes()](std::vector<Tensor>& g) {
    const Tensor z = zeros({}, TensorOptions(g[0].dtype()).with_device(g[0].device()));
    NoGradGuard ng;
    return std::vector<Tensor>{sum_to(where(cond, g[0], z), as), sum_to(where(cond, z, g[0]), bs)};
  });
  return y;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value) {
  KILN_CHECK(x.defined() && mask.defined(), "masked_fill: undefined tensor");
  KILN_CHECK(mask.dtype() == DType::boolean, "masked_fill: the mask must be a boolean tensor, got ", mask.dtype());
  KILN_CHECK(broadcast_shapes(mask.sizes(), x.sizes(), "masked_fill") == x.sizes(), "masked_fill: mask ",
             shape_str(mask.sizes()), " does not broadcast to the tensor's ", shape_str(x.sizes()));
  const Tensor v = full({}, value.to_double(), TensorOptions(x.dtype()).with_device(x.device()));
  return where(mask, v, x);
}

namespace {
ValuesIndices sort_impl(const Tensor& x0, int64_t k, int64_t dim, bool descending, const char* op) {
  KILN_CHECK(x0.defined(), op, ": undefined tensor");
  KILN_CHECK(x0.dtype() != DType::boolean, op, ": dtype bool is not supported");
  const int64_t d = wrap_dim(dim, std::max<int64_t>(x0.dim(), 1), op);
  const Tensor x = x0.contiguous();
  const Axis a = axis_of(x.sizes(), d);
  if (k < 0) k = a.n;
  KILN_CHECK(k <= a.n, op, ": k = ", k, " but dim ", d, " has size ", a.n);
  SortDesc s;
  s.dtype = x.dtype();
  s.outer = a.outer;
  s.n = a.n;
  s.inner = a.inner;
  s.k = k;
  s.descending = descending;
  Shape out = x.sizes();
  if (!out.empty()) out[size_t(d)] = k;
  ValuesIndices r;
  r.values = empty(out, TensorOptions(x.dtype()).with_device(x.device()));
  r.indices = empty(out, TensorOptions(DType::int64).with_device(x.device()));
  if (r.values.numel() > 0)
    dispatch<kernel_op::sort>(x.device().type, s, x.data_ptr(), r.values.data_ptr(), r.indices.data<int64_t>());
  autograd::record_fn(k == a.n ? "SortBackward" : "TopkBackward", {x0}, {&r.values},
                      [d, idx = r.indices, xs = x0.sizes()](std::vector<Tensor>& g) {
                        Tensor gx = zeros(xs, TensorOptions(g[0].dtype()).with_device(g[0].device()));
                        run_scatter(gx, d, idx, g[0], false, true);
                        return std::vector<Tensor>{gx};
                      });
  return r;
}
}  // namespace

ValuesIndices sort(const Tensor& x, int64_t dim, bool descending) { return sort_impl(x, -1, dim, descending, "sort"); }

ValuesIndices topk(const Tensor& x, int64_t k, int64_t dim, bool largest) {
  KILN_CHECK(k >= 0, "topk: k must be at least 0, got ", k);
  return sort_impl(x, k, dim, largest, "topk");
}

Tensor cumsum(const Tensor& x0, int64_t dim) {
  KILN_CHECK(x0.defined(), "cumsum: undefined tensor");
  const int64_t d = wrap_dim(dim, std::max<int64_t>(x0.dim(), 1), "cumsum");
  // Integers and booleans sum as int64; 16-bit floats in float32.
  const DType compute = is_floating(x0.dtype()) ? (is_half(x0.dtype()) ? DType::float32 : x0.dtype()) : DType::int64;
  const Tensor x = x0.detach().to(compute).contiguous();
  const Axis a = axis_of(x.sizes(), d);
  ScanDesc s;
  s.dtype = compute;
  s.outer = a.outer;
  s.n = a.n;
  s.inner = a.inner;
  Tensor y = empty(x.sizes(), TensorOptions(compute).with_device(x.device()));
  if (y.numel() > 0) dispatch<kernel_op::cumsum>(x.device().type, s, x.data_ptr(), y.data_ptr());
  if (is_half(x0.dtype())) y = y.to(x0.dtype());
  autograd::record_fn("CumsumBackward", {x0}, {&y}, [s](std::vector<Tensor>& g) {
    ScanDesc r = s;
    r.reverse = true;
    const Tensor gc = g[0].to(r.dtype).contiguous();
    Tensor gx = empty(gc.sizes(), TensorOptions(r.dtype).with_device(gc.device()));
    if (gx.numel() > 0) dispatch<kernel_op::cumsum>(gc.device().type, r, gc.data_ptr(), gx.data_ptr());
    return std::vector<Tensor>{gx.to(g[0].dtype())};
  });
  return y;
}

}  // namespace ops
}  // namespace kiln
