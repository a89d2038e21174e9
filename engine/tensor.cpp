#include "engine/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <numeric>
#include <sstream>

#include "engine/allocator.h"
#include "engine/autograd.h"
#include "engine/checked_size.h"
#include "engine/cuda_allocator.h"
#include "engine/cuda_copy.h"
#include "engine/cuda_runtime.h"
#include "engine/dispatch.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/iter.h"
#include "engine/ops/reduce.h"
#include "engine/graph_op.h"
#include "kernels/common/elementwise.h"

namespace kiln {

// ---------------------------------------------------------------- shapes

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// Strides skip zero sizes (a [0, 2^40, 2^40] tensor is empty), so their product is checked on its
// own: an empty tensor's dims could still overflow it (found by fuzz/targets/npy.cpp).
Shape contiguous_strides(const Shape& shape) {
  Shape st(shape.size());
  uint64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    st[i] = int64_t(s);
    if (i > 0 && (__builtin_mul_overflow(s, uint64_t(std::max<int64_t>(shape[i], 1)), &s) || s > kMaxSize))
      KILN_THROW("strides of shape ", shape_str(shape), " overflow (the limit is 2^63 - 1)");
  }
  return st;
}

Shape channels_last_strides(const Shape& shape) {
  if (shape.size() != 4) return contiguous_strides(shape);
  const uint64_t C = uint64_t(std::max<int64_t>(shape[1], 1)), H = uint64_t(std::max<int64_t>(shape[2], 1)),
                 W = uint64_t(std::max<int64_t>(shape[3], 1));
  const uint64_t wc = checked_mul(W, C, "channels-last strides");
  return {int64_t(checked_mul(H, wc, "channels-last strides")), 1, int64_t(wc), int64_t(C)};
}

int64_t shape_numel(const Shape& shape) { return checked_numel(shape, "shape"); }

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  KILN_CHECK(dim >= -ndim && dim < ndim, op, ": dim ", dim, " out of range for a tensor with ", ndim, " dims");
  return dim < 0 ? dim + ndim : dim;
}

static void check_shape(const Shape& shape, const char* op) {
  for (auto s : shape) KILN_CHECK(s >= 0, op, ": negative size in shape ", shape_str(shape));
}

// ---------------------------------------------------------------- storage and factories

uint64_t StorageImpl::next_id() {
  static std::atomic<uint64_t> counter{0};
  return counter.fetch_add(1, std::memory_order_relaxed) + 1;
}

uint64_t Tensor::values_key() const {
  const TensorImpl* t = checked();
  auto mix = [](uint64_t h, uint64_t v) {  // splitmix64 step over the running hash
    uint64_t z = h ^ (v + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2));
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  };
  const uint64_t h = mix(mix(mix(0, t->storage->id), t->storage->version.load(std::memory_order_acquire)),
                         uint64_t(t->offset));
  return h == 0 ? 1 : h;
}

std::shared_ptr<StorageImpl> allocate_storage(size_t nbytes, Device device) {
  if (device.is_cuda()) {
    // Stream-ordered: the memory belongs to the current stream of its device, where the op that
    // asked for it will write it.
    cuda::check_device(device);
    void* p = cuda::CudaCachingAllocator::instance().allocate(nbytes, device.index, cuda::current_stream(device.index));
    return std::make_shared<StorageImpl>(p, nbytes, device,
                                         [](void* q, size_t) { cuda::CudaCachingAllocator::instance().free(q); });
  }
  void* p = CpuAllocator::instance().allocate(nbytes);
  return std::make_shared<StorageImpl>(p, nbytes, device,
                                       [](void* q, size_t n) { CpuAllocator::instance().deallocate(q, n); });
}

Tensor empty_strided(const Shape& shape, const Shape& strides, TensorOptions opts) {
  check_shape(shape, "empty");
  KILN_CHECK(shape.size() == strides.size(), "empty_strided: ", shape.size(), " sizes but ", strides.size(), " strides");
  // Sizes come from files and specs too: the element count and the byte extent are checked for
  // overflow (engine/checked_size.h), so a shape that wraps 2^64 cannot yield a small buffer.
  bool any_zero = checked_numel(shape, "empty") == 0;
  uint64_t extent = 1;
  for (size_t i = 0; i < shape.size() && !any_zero; ++i) {
    uint64_t stride = uint64_t(strides[i] < 0 ? -strides[i] : strides[i]);
    extent = checked_add(extent, checked_mul(uint64_t(shape[i] - 1), stride, "empty_strided: extent"),
                         "empty_strided: extent");
  }
  size_t nbytes = any_zero ? 0 : checked_mul(extent, element_size(opts.dtype), "empty_strided: bytes");
  if (nbytes > 0 && TensorBytesLimit::current()) check_tensor_bytes(shape, element_size(opts.dtype), "a new tensor");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = allocate_storage(nbytes, opts.device);
  impl->sizes = shape;
  impl->strides = strides;
  impl->dtype = opts.dtype;
  impl->requires_grad = opts.requires_grad;
  return Tensor(impl);
}

Tensor empty(const Shape& shape, TensorOptions opts) {
  check_shape(shape, "empty");
  return empty_strided(shape, contiguous_strides(shape), opts);
}

Tensor full(const Shape& shape, double value, TensorOptions opts) {
  bool rg = opts.requires_grad;
  opts.requires_grad = false;
  Tensor t = empty(shape, opts);
  t.fill_(value);
  return t.requires_grad_(rg);
}
Tensor zeros(const Shape& shape, TensorOptions opts) { return full(shape, 0.0, opts); }
Tensor ones(const Shape& shape, TensorOptions opts) { return full(shape, 1.0, opts); }
Tensor scalar_tensor(double value, TensorOptions opts) { return full({}, value, opts); }
Tensor empty(const Shape& shape, TensorOptions opts, MemoryFormat format) {
  check_shape(shape, "empty");
  if (format == MemoryFormat::channels_last && shape.size() == 4)
    return empty_strided(shape, channels_last_strides(shape), opts);
  return empty_strided(shape, contiguous_strides(shape), opts);
}

Tensor empty_like(const Tensor& t, MemoryFormat format) {
  return empty(t.sizes(), TensorOptions(t.dtype()).with_device(t.device()), format);
}

Tensor empty_like(const Tensor& t) { return empty(t.sizes(), TensorOptions(t.dtype()).with_device(t.device())); }
Tensor zeros_like(const Tensor& t) { return zeros(t.sizes(), TensorOptions(t.dtype()).with_device(t.device())); }
Tensor ones_like(const Tensor& t) { return ones(t.sizes(), TensorOptions(t.dtype()).with_device(t.device())); }

Tensor arange(int64_t n, TensorOptions opts) {
  std::vector<double> v(size_t(std::max<int64_t>(n, 0)));
  std::iota(v.begin(), v.end(), 0.0);
  return from_vector(v, {n}, opts);
}

Tensor from_vector(const std::vector<double>& values, const Shape& shape, TensorOptions opts) {
  check_shape(shape, "from_vector");
  KILN_CHECK(int64_t(values.size()) == shape_numel(shape), "from_vector: ", values.size(),
             " values do not fill shape ", shape_str(shape));
  bool rg = opts.requires_grad;
  Tensor src = empty(shape, TensorOptions(DType::float64));
  std::copy(values.begin(), values.end(), src.data<double>());
  Tensor t = src.to(opts.dtype);
  if (t.is_same(src)) t = src;
  if (!opts.device.is_cpu()) t = t.to(opts.device);
  return t.requires_grad_(rg);
}

Tensor from_vector(const std::vector<float>& values, const Shape& shape, TensorOptions opts) {
  return from_vector(std::vector<double>(values.begin(), values.end()), shape, opts);
}

// ---------------------------------------------------------------- metadata

int64_t Tensor::size(int64_t d) const { return sizes()[size_t(wrap_dim(d, dim(), "size"))]; }
int64_t Tensor::stride(int64_t d) const { return strides()[size_t(wrap_dim(d, dim(), "stride"))]; }
int64_t Tensor::numel() const { return shape_numel(sizes()); }

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (int64_t d = dim() - 1; d >= 0; --d) {
    if (size(d) == 1) continue;
    if (stride(d) != expected) return false;
    expected *= size(d);
  }
  return true;
}

bool Tensor::is_contiguous(MemoryFormat format) const {
  if (format == MemoryFormat::contiguous || dim() != 4) return is_contiguous();
  // C fastest, then W, H, N; size-1 dims may have any stride.
  int64_t expected = 1;
  for (int64_t d : {1, 3, 2, 0}) {
    if (size(d) == 1) continue;
    if (stride(d) != expected) return false;
    expected *= size(d);
  }
  return true;
}

MemoryFormat Tensor::suggest_memory_format() const {
  if (dim() != 4 || !is_contiguous(MemoryFormat::channels_last)) return MemoryFormat::contiguous;
  // Dense both ways (a size-1 C, H or W): the exact strides decide, so an [N, 1, H, W] input
  // made channels-last stays so and its convolution's output is channels-last too.
  if (!is_contiguous() || strides() == channels_last_strides(sizes())) return MemoryFormat::channels_last;
  return MemoryFormat::contiguous;
}

void* Tensor::data_ptr() const {
  TensorImpl* i = checked();
  return static_cast<char*>(i->storage->data) + i->offset * int64_t(kiln::element_size(i->dtype));
}

void Tensor::throw_undefined(const char* accessor) {
  throw Error(std::string("Tensor::") + accessor +
              "(): the Tensor is undefined (default-constructed, moved from, or an absent optional input "
              "such as a missing bias or grad())",
              __FILE__, __LINE__);
}

std::string Tensor::str() const {
  if (!defined()) return "Tensor(undefined)";
  return "Tensor" + shape_str(sizes()) + " " + dtype_name(dtype()) + " " + device().str();
}

// ---------------------------------------------------------------- views

static Tensor make_view(const Tensor& base, Shape sizes, Shape strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.impl()->storage;
  impl->sizes = std::move(sizes);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = base.dtype();
  return Tensor(impl);
}

static Shape infer_shape(Shape shape, int64_t numel, const char* op, const Shape& from) {
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      KILN_CHECK(infer < 0, op, ": only one dim may be -1 in ", shape_str(shape));
      infer = int64_t(i);
    } else {
      KILN_CHECK(shape[i] >= 0, op, ": invalid size in shape ", shape_str(shape));
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    KILN_CHECK(known > 0 && numel % known == 0, op, ": shape ", shape_str(shape), " is invalid for input of shape ",
               shape_str(from));
    shape[size_t(infer)] = numel / known;
  }
  KILN_CHECK(shape_numel(shape) == numel, op, ": shape ", shape_str(shape), " is invalid for input of shape ",
             shape_str(from), " (", numel, " elements)");
  return shape;
}

// Strides for viewing (sizes, strides) as `shape` without a copy, if possible (ATen's computeStride).
static bool view_strides(const Shape& sizes, const Shape& strides, const Shape& shape, Shape& out) {
  out.assign(shape.size(), 0);
  if (shape_numel(sizes) == 0 || sizes.empty()) {
    out = contiguous_strides(shape);
    return true;
  }
  int64_t view_d = int64_t(shape.size()) - 1;
  int64_t chunk_base_stride = strides.empty() ? 1 : strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = int64_t(sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= sizes[d];
    if (d == 0 || (sizes[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

Tensor Tensor::view(const Shape& shape0) const {
  return graph::call(GraphOp::reshape, {*this}, graph::no_attrs, [&](const Tensor*) {
    Shape shape = infer_shape(shape0, numel(), "view", sizes());
    Shape st;
    KILN_CHECK(view_strides(sizes(), strides(), shape, st), "view: cannot view ", shape_str(sizes()), " with strides ",
               shape_str(strides()), " as ", shape_str(shape), "; use reshape()");
    Tensor y = make_view(*this, shape, st, storage_offset());
    autograd::record_fn("ViewBackward", {*this}, {&y}, [s = sizes()](std::vector<Tensor>& g) {
      return std::vector<Tensor>{g[0].reshape(s)};
    });
    return y;
  });
}

Tensor Tensor::reshape(const Shape& shape0) const {
  return graph::call(GraphOp::reshape, {*this}, graph::no_attrs, [&](const Tensor*) {
    Shape shape = infer_shape(shape0, numel(), "reshape", sizes());
    Shape st;
    if (view_strides(sizes(), strides(), shape, st)) return view(shape);
    return clone().view(shape);
  });
}

Tensor Tensor::permute(const Shape& dims) const {
  KILN_CHECK(int64_t(dims.size()) == dim(), "permute: ", dims.size(), " dims given for a tensor of shape ",
             shape_str(sizes()));
  Shape sz(dims.size()), st(dims.size()), inv(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrap_dim(dims[i], dim(), "permute");
    KILN_CHECK(!seen[size_t(d)], "permute: repeated dim ", d, " in ", shape_str(dims));
    seen[size_t(d)] = true;
    sz[i] = size(d);
    st[i] = stride(d);
    inv[size_t(d)] = int64_t(i);
  }
  Tensor y = make_view(*this, sz, st, storage_offset());
  autograd::record_fn("PermuteBackward", {*this}, {&y}, [inv](std::vector<Tensor>& g) {
    return std::vector<Tensor>{g[0].permute(inv)};
  });
  return y;
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  d0 = wrap_dim(d0, dim(), "transpose");
  d1 = wrap_dim(d1, dim(), "transpose");
  Shape p(static_cast<size_t>(dim()));
  std::iota(p.begin(), p.end(), 0);
  std::swap(p[size_t(d0)], p[size_t(d1)]);
  return permute(p);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  const auto attrs = [&] { return std::vector<trace::Attr>{trace::ints("slice", {d, start, end, step})}; };
  return graph::call(GraphOp::slice, {*this}, attrs, [&, d, start, end](const Tensor*) mutable {
    d = wrap_dim(d, dim(), "slice");
    KILN_CHECK(step > 0, "slice: step must be positive, got ", step);
    const int64_t n = size(d);
    if (start < 0) start += n;
    if (end < 0) end += n;
    start = std::min(std::max<int64_t>(start, 0), n);
    end = std::min(std::max<int64_t>(end, start), n);
    Shape sz = sizes(), st = strides();
    sz[size_t(d)] = (end - start + step - 1) / step;
    st[size_t(d)] *= step;
    Tensor y = make_view(*this, sz, st, storage_offset() + start * stride(d));
    autograd::record_fn("SliceBackward", {*this}, {&y}, [xs = sizes(), dt = dtype(), d, start, end, step](std::vector<Tensor>& g) {
      Tensor gx = zeros(xs, TensorOptions(dt).with_device(g[0].device()));
      gx.slice(d, start, end, step).copy_(g[0]);
      return std::vector<Tensor>{gx};
    });
    return y;
  });
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  d = wrap_dim(d, dim(), "select");
  const int64_t n = size(d);
  KILN_CHECK(index >= -n && index < n, "select: index ", index, " out of range for dim ", d, " of size ", n);
  if (index < 0) index += n;
  return slice(d, index, index + 1).squeeze(d);
}

Tensor Tensor::expand(const Shape& shape) const {
  KILN_CHECK(int64_t(shape.size()) >= dim(), "expand: target ", shape_str(shape), " has fewer dims than ",
             shape_str(sizes()));
  const size_t lead = shape.size() - size_t(dim());
  Shape sz(shape.size()), st(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      KILN_CHECK(shape[i] >= 0, "expand: invalid size ", shape[i], " for new dim in ", shape_str(shape));
      sz[i] = shape[i];
      st[i] = 0;
      continue;
    }
    int64_t cur = size(int64_t(i - lead));
    int64_t want = shape[i] == -1 ? cur : shape[i];
    KILN_CHECK(cur == want || cur == 1, "expand: size ", cur, " of dim ", i - lead, " cannot expand to ", want,
               " (", shape_str(sizes()), " -> ", shape_str(shape), ")");
    sz[i] = want;
    st[i] = (cur == want) ? stride(int64_t(i - lead)) : 0;
  }
  if (sz == sizes()) return *this;
  Tensor y = make_view(*this, sz, st, storage_offset());
  autograd::record_fn("ExpandBackward", {*this}, {&y}, [xs = sizes()](std::vector<Tensor>& g) {
    return std::vector<Tensor>{ops::sum_to(g[0], xs)};
  });
  return y;
}

Tensor Tensor::squeeze() const {
  Shape s;
  for (auto v : sizes()) if (v != 1) s.push_back(v);
  return view(s);
}

Tensor Tensor::squeeze(int64_t d) const {
  d = wrap_dim(d, dim(), "squeeze");
  if (size(d) != 1) return *this;
  Shape s = sizes();
  s.erase(s.begin() + d);
  return view(s);
}

Tensor Tensor::unsqueeze(int64_t d) const {
  d = wrap_dim(d, dim() + 1, "unsqueeze");
  Shape s = sizes();
  s.insert(s.begin() + d, 1);
  return view(s);
}

Tensor Tensor::flatten(int64_t start, int64_t end) const {
  return graph::call(GraphOp::reshape, {*this}, graph::no_attrs, [&, start, end](const Tensor*) mutable {
    if (dim() == 0) return reshape({1});
    start = wrap_dim(start, dim(), "flatten");
    end = wrap_dim(end, dim(), "flatten");
    KILN_CHECK(start <= end, "flatten: start dim ", start, " after end dim ", end);
    Shape s;
    for (int64_t d = 0; d < start; ++d) s.push_back(size(d));
    int64_t m = 1;
    for (int64_t d = start; d <= end; ++d) m *= size(d);
    s.push_back(m);
    for (int64_t d = end + 1; d < dim(); ++d) s.push_back(size(d));
    return reshape(s);
  });
}

// ---------------------------------------------------------------- copies

// Same dtype, sizes and strides, and dense in memory (no gaps, no overlap): the copy is one
// memcpy of the spanned bytes, on any device.
static bool same_dense_layout(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes() || a.strides() != b.strides()) return false;
  return a.is_contiguous() || a.is_contiguous(MemoryFormat::channels_last);
}

static void copy_kernel(const Tensor& dst, const Tensor& src) {
  // On CUDA a dense same-layout copy needs no kernel (cudaMemcpyAsync on the current stream).
  if (dst.device().is_cuda() && src.device() == dst.device() && same_dense_layout(dst, src)) {
    cuda::copy_bytes(dst.data_ptr(), dst.device(), src.data_ptr(), src.device(), size_t(src.numel()) * src.element_size());
    return;
  }
  CopyDesc d;
  d.src_dtype = src.dtype();
  d.dst_dtype = dst.dtype();
  d.loop = make_loop(dst, {&src});
  dispatch<kernel_op::copy>(dst.device().type, d, src.data_ptr(), dst.data_ptr());
}

Tensor Tensor::clone() const {
  Tensor y = empty(sizes(), TensorOptions(dtype()).with_device(device()));
  copy_kernel(y, *this);
  autograd::record_fn("CloneBackward", {*this}, {&y}, [](std::vector<Tensor>& g) { return std::vector<Tensor>{g[0]}; });
  return y;
}

Tensor Tensor::contiguous() const {
  return graph::call(GraphOp::identity, {*this}, graph::no_attrs, [&](const Tensor*) {
    return is_contiguous() ? *this : clone();
  });
}

Tensor Tensor::contiguous(MemoryFormat format) const {
  return graph::call(GraphOp::identity, {*this}, graph::no_attrs, [&](const Tensor*) {
    if (format == MemoryFormat::contiguous || dim() != 4) return contiguous();
    if (suggest_memory_format() == MemoryFormat::channels_last) return *this;
    Tensor y = empty_like(*this, format);
    copy_kernel(y, *this);
    autograd::record_fn("ContiguousBackward", {*this}, {&y}, [](std::vector<Tensor>& g) { return std::vector<Tensor>{g[0]}; });
    return y;
  });
}

Tensor Tensor::to(DType t) const {
  if (t == dtype()) return *this;
  Tensor y = empty(sizes(), TensorOptions(t).with_device(device()), suggest_memory_format());
  copy_kernel(y, *this);
  if (is_floating(t) && is_floating(dtype()))
    autograd::record_fn("ToDtypeBackward", {*this}, {&y}, [src = dtype()](std::vector<Tensor>& g) {
      return std::vector<Tensor>{g[0].to(src)};
    });
  return y;
}

Tensor Tensor::to(Device d) const {
  if (d == device()) return *this;
  if (d.is_cuda()) cuda::check_device(d);
  Tensor src = *this;
  {
    // Dense tensors travel as they are (channels-last stays channels-last); others are made
    // contiguous on their own device first (on CUDA through the dispatcher's copy kernel).
    NoGradGuard ng;
    const MemoryFormat fmt = suggest_memory_format();
    if (!is_contiguous(fmt)) src = contiguous(fmt);
  }
  Tensor y = empty_strided(src.sizes(), src.strides(), TensorOptions(dtype()).with_device(d));
  cuda::copy_bytes(y.data_ptr(), d, src.data_ptr(), src.device(), size_t(src.numel()) * src.element_size());
  if (is_floating(dtype()))
    autograd::record_fn("ToDeviceBackward", {*this}, {&y}, [from = device()](std::vector<Tensor>& g) {
      return std::vector<Tensor>{g[0].to(from)};
    });
  return y;
}

Tensor& Tensor::copy_(const Tensor& src) {
  KILN_CHECK(src.defined(), "copy_: undefined source");
  KILN_CHECK(!(requires_grad() && is_leaf() && autograd::grad_mode_enabled()),
             "copy_: in-place write to a leaf that requires grad; wrap it in NoGradGuard");
  bump_version();
  if (src.device() != device()) {
    NoGradGuard ng;
    copy_kernel(*this, src.to(device()));
    return *this;
  }
  copy_kernel(*this, src);
  return *this;
}

Tensor& Tensor::fill_(double value) {
  KILN_CHECK(!(requires_grad() && is_leaf() && autograd::grad_mode_enabled()),
             "fill_: in-place write to a leaf that requires grad; wrap it in NoGradGuard");
  FillDesc d;
  d.dtype = dtype();
  d.value = value;
  d.loop = make_loop(*this, {});
  bump_version();
  dispatch<kernel_op::fill>(device().type, d, data_ptr());
  return *this;
}

// ---------------------------------------------------------------- values

std::vector<double> Tensor::to_vector() const {
  NoGradGuard ng;
  // A CUDA tensor is copied to the host first (synchronising its stream), then converted there.
  Tensor c = device().is_cpu() ? *this : to(Device());
  c = c.to(DType::float64).contiguous();
  if (c.is_same(*this) || c.impl()->storage == impl()->storage) c = c.clone();
  const double* p = c.data<double>();
  return std::vector<double>(p, p + c.numel());
}

double Tensor::item() const {
  KILN_CHECK(numel() == 1, "item: tensor of shape ", shape_str(sizes()), " has ", numel(), " elements, not 1");
  return to_vector()[0];
}

double Tensor::at(std::initializer_list<int64_t> index) const {
  KILN_CHECK(int64_t(index.size()) == dim(), "at: ", index.size(), " indices for a tensor of shape ",
             shape_str(sizes()));
  Tensor t = *this;
  int64_t d = 0;
  for (int64_t i : index) {
    KILN_CHECK(i >= -size(d) && i < size(d), "at: index ", i, " out of range for dim ", d, " of shape ",
               shape_str(sizes()));
    t = t.slice(d, i < 0 ? i + size(d) : i, (i < 0 ? i + size(d) : i) + 1);
    ++d;
  }
  return t.item();
}


// ---------------------------------------------------------------- autograd surface

Tensor& Tensor::requires_grad_(bool r) {
  TensorImpl* i = checked();
  KILN_CHECK(!r || is_floating(i->dtype), "requires_grad_: only floating-point tensors can require grad, got ",
             i->dtype);
  KILN_CHECK(r || !i->grad_fn, "requires_grad_(false) on a non-leaf; use detach()");
  i->requires_grad = r;
  return *this;
}

Tensor Tensor::grad() const { return checked()->grad ? Tensor(checked()->grad) : Tensor(); }

void Tensor::set_grad(const Tensor& g) {
  if (g.defined())
    KILN_CHECK(g.sizes() == sizes(), "set_grad: gradient shape ", shape_str(g.sizes()), " != tensor shape ",
               shape_str(sizes()));
  checked()->grad = g.impl_ptr();
}

Tensor& Tensor::retain_grad() {
  TensorImpl* i = checked();
  i->retains_grad = true;
  if (i->grad_fn) {
    auto& r = i->grad_fn->retained_outputs;
    if (r.size() <= i->output_nr) r.resize(i->output_nr + 1);
    r[i->output_nr] = impl_;
  }
  return *this;
}

Tensor Tensor::detach() const {
  Tensor y = make_view(*this, sizes(), strides(), storage_offset());
  return y;
}

void Tensor::backward(const Tensor& grad, bool retain_graph) const {
  KILN_CHECK(requires_grad(), "backward: tensor does not require grad and has no grad_fn");
  Tensor g = grad;
  if (!g.defined()) {
    KILN_CHECK(numel() == 1, "backward: grad can be implicit only for one-element outputs, got shape ",
               shape_str(sizes()));
    g = ones(sizes(), TensorOptions(dtype()).with_device(device()));
  }
  KILN_CHECK(g.sizes() == sizes(), "backward: gradient shape ", shape_str(g.sizes()), " != output shape ",
             shape_str(sizes()));
  autograd::run_backward({*this}, {g}, retain_graph);
}

void Tensor::register_post_accumulate_grad_hook(std::function<void(Tensor&)> hook) {
  KILN_CHECK(is_leaf() && requires_grad(), "register_post_accumulate_grad_hook: only leaves that require grad");
  checked()->post_accumulate_hooks.push_back(std::move(hook));
}

}  // namespace kiln
