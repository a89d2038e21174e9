// Tensor: a strided view (sizes, strides in elements, storage offset, dtype) over reference-counted
// Storage on a Device, plus the autograd state of PyTorch's design (requires_grad, grad, grad_fn).
// Copying a Tensor copies the handle, not the data. Not thread-safe for concurrent mutation.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/device.h"
#include "engine/dtype.h"
#include "engine/error.h"

namespace kiln {

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);

class Node;
class Tensor;

// Owns one block of device memory. Freed through the allocator that made it.
struct StorageImpl {
  void* data = nullptr;
  size_t nbytes = 0;
  Device device;
  std::function<void(void*, size_t)> deleter;
  // Bumped by kiln's in-place writes (copy_, fill_, random fills, optimizer steps, batch norm's
  // running statistics): caches derived from the values (folded batch norm) compare it. Writes
  // through data_ptr() by the caller do not bump it.
  std::atomic<uint64_t> version{0};
  // Unique over the process's lifetime (never reused, unlike `data`): with `version` it names
  // the values a storage holds (Tensor::values_key).
  const uint64_t id;
  StorageImpl(void* d, size_t n, Device dev, std::function<void(void*, size_t)> del)
      : data(d), nbytes(n), device(dev), deleter(std::move(del)), id(next_id()) {}
  StorageImpl(const StorageImpl&) = delete;
  StorageImpl& operator=(const StorageImpl&) = delete;
  ~StorageImpl() {
    if (deleter) deleter(data, nbytes);
  }

 private:
  static uint64_t next_id();
};
std::shared_ptr<StorageImpl> allocate_storage(size_t nbytes, Device device);

struct TensorImpl {
  std::shared_ptr<StorageImpl> storage;
  Shape sizes;
  Shape strides;
  int64_t offset = 0;
  DType dtype = DType::float32;

  // autograd
  bool requires_grad = false;
  bool retains_grad = false;
  std::shared_ptr<Node> grad_fn;  // null for leaves
  uint32_t output_nr = 0;         // which output of grad_fn this is
  std::shared_ptr<TensorImpl> grad;
  std::weak_ptr<Node> grad_accumulator;
  // Called once per backward pass, after the gradient of this leaf is complete.
  std::vector<std::function<void(Tensor&)>> post_accumulate_hooks;
};

// Memory formats of 4-d tensors. channels_last is a stride order (NHWC in memory, sizes still
// N, C, H, W), not another kind of tensor: PyTorch's torch.channels_last. Conv, batch norm,
// pooling and elementwise ops keep it, and the oneDNN and native CPU kernels run it without
// reorders (as PyTorch does with channels-last on oneDNN).
enum class MemoryFormat : uint8_t { contiguous, channels_last };

struct TensorOptions {
  DType dtype = DType::float32;
  Device device{};
  bool requires_grad = false;
  TensorOptions() = default;
  TensorOptions(DType t) : dtype(t) {}  // NOLINT
  TensorOptions(Device d) : device(d) {}  // NOLINT
  TensorOptions& with_dtype(DType t) { dtype = t; return *this; }
  TensorOptions& with_device(Device d) { device = d; return *this; }
  TensorOptions& with_requires_grad(bool r = true) { requires_grad = r; return *this; }
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

  // --- metadata
  const Shape& sizes() const { return checked()->sizes; }
  const Shape& strides() const { return checked()->strides; }
  int64_t dim() const { return int64_t(sizes().size()); }
  int64_t size(int64_t d) const;
  int64_t stride(int64_t d) const;
  int64_t numel() const;
  int64_t storage_offset() const { return checked()->offset; }
  DType dtype() const { return checked()->dtype; }
  Device device() const { return checked()->storage->device; }
  size_t element_size() const { return kiln::element_size(dtype()); }
  bool is_contiguous() const;
  bool is_contiguous(MemoryFormat format) const;
  // channels_last when 4-d and laid out NHWC but not NCHW; when dense both ways (a size-1 C, H or
  // W) when the strides are exactly channels_last_strides (what contiguous(channels_last) gives).
  MemoryFormat suggest_memory_format() const;
  bool is_floating_point() const { return is_floating(dtype()); }
  // Pointer to the first element (storage data + offset).
  void* data_ptr() const;
  template <class T> T* data() const {
    KILN_CHECK(dtype() == dtype_of<T>::value, "Tensor::data: tensor is ", dtype(), ", asked for ",
               dtype_of<T>::value);
    return static_cast<T*>(data_ptr());
  }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }
  // The write counter of the storage (shared by every view of it): see StorageImpl::version.
  uint64_t version() const { return checked()->storage->version.load(std::memory_order_acquire); }
  // Marks the storage written (kernels that write a tensor in place call it).
  void bump_version() const { checked()->storage->version.fetch_add(1, std::memory_order_acq_rel); }
  // Names the values this tensor's storage holds now: the storage's id, its write counter and the
  // view's offset, mixed into 64 bits (never 0). Equal keys mean the same values as far as kiln's
  // own writes go (a write through data_ptr() is not seen, as for version()).
  uint64_t values_key() const;
  std::string str() const;  // "Tensor[2, 3] float32 cpu"

  // --- views: share storage, no copy; differentiable
  Tensor view(const Shape& shape) const;     // needs compatible strides; -1 infers one size
  Tensor reshape(const Shape& shape) const;  // view when possible, else a copy
  Tensor permute(const Shape& dims) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const { return transpose(0, 1); }
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const { return slice(dim, start, start + length); }
  Tensor select(int64_t dim, int64_t index) const;
  Tensor expand(const Shape& shape) const;   // -1 keeps a size; new leading dims allowed
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor contiguous() const;  // self if already contiguous
  Tensor contiguous(MemoryFormat format) const;  // self if already in `format`; differentiable
  Tensor clone() const;       // contiguous copy, differentiable
  Tensor to(DType t) const;   // self if same dtype
  Tensor to(Device d) const;

  // --- in place (not recorded by autograd; refused on leaves that require grad)
  Tensor& fill_(double value);
  Tensor& zero_() { return fill_(0.0); }
  Tensor& copy_(const Tensor& src);  // broadcasts src, converts dtype

  // --- values (copies to the host)
  double item() const;
  double at(std::initializer_list<int64_t> index) const;
  std::vector<double> to_vector() const;
  template <class T> std::vector<T> to_vector_of() const {
    std::vector<double> v = to_vector();
    return std::vector<T>(v.begin(), v.end());
  }

  // --- autograd
  bool requires_grad() const { return defined() && impl_->requires_grad; }
  Tensor& requires_grad_(bool r = true);
  bool is_leaf() const { return !impl_ || impl_->grad_fn == nullptr; }
  const std::shared_ptr<Node>& grad_fn() const { return checked()->grad_fn; }
  Tensor grad() const;
  void set_grad(const Tensor& g);
  Tensor& retain_grad();
  // Seeds the backward pass with `grad` (default: ones for a one-element tensor).
  void backward(const Tensor& grad = Tensor(), bool retain_graph = false) const;
  Tensor detach() const;  // shares storage, no grad_fn, requires_grad false
  // Leaf only: `hook` runs once per backward pass when this leaf's .grad is final.
  void register_post_accumulate_grad_hook(std::function<void(Tensor&)> hook);

 private:
  // `accessor` is the member the caller is in (GCC and Clang fill it in), so that the error
  // says which use met the undefined Tensor.
#if defined(__GNUC__) || defined(__clang__)
  TensorImpl* checked(const char* accessor = __builtin_FUNCTION()) const {
#else
  TensorImpl* checked(const char* accessor = "an accessor") const {
#endif
    if (!impl_) throw_undefined(accessor);
    return impl_.get();
  }
  [[noreturn]] static void throw_undefined(const char* accessor);
  std::shared_ptr<TensorImpl> impl_;
};

// PyTorch's printing (engine/print.h: the options, summarised and wrapped as PyTorch does).
std::ostream& operator<<(std::ostream& os, const Tensor& t);
std::string to_string(const Tensor& t);

// --- factories
Tensor empty(const Shape& shape, TensorOptions opts = {});
Tensor empty_strided(const Shape& shape, const Shape& strides, TensorOptions opts = {});
Tensor zeros(const Shape& shape, TensorOptions opts = {});
Tensor ones(const Shape& shape, TensorOptions opts = {});
Tensor full(const Shape& shape, double value, TensorOptions opts = {});
Tensor arange(int64_t n, TensorOptions opts = TensorOptions(DType::int64));  // 0, 1, ..., n-1; int64 as torch.arange(n)
Tensor empty(const Shape& shape, TensorOptions opts, MemoryFormat format);
Tensor empty_like(const Tensor& t);  // contiguous
Tensor empty_like(const Tensor& t, MemoryFormat format);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
// Copies host values into a new tensor of the given shape (converted to opts.dtype).
Tensor from_vector(const std::vector<double>& values, const Shape& shape, TensorOptions opts = {});
Tensor from_vector(const std::vector<float>& values, const Shape& shape, TensorOptions opts = {});
Tensor scalar_tensor(double value, TensorOptions opts = {});

// Contiguous strides for a shape (row-major, NCHW for 4-d).
Shape contiguous_strides(const Shape& shape);
// NHWC strides of a 4-d shape [N, C, H, W] (other ranks: contiguous_strides).
Shape channels_last_strides(const Shape& shape);
int64_t shape_numel(const Shape& shape);
// Wraps a possibly negative dim into [0, ndim); throws naming `op` when out of range.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);

// Tensors with dotted names ("features.0.weight"): a module's parameters or state dict, an
// optimizer's parameters and state.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

}  // namespace kiln
