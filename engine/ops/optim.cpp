// Op wrappers of the optimizer family: argument checks, dispatch, registration. The updates write
// through data pointers, outside autograd (parameters are leaves that require grad, which the
// in-place Tensor methods refuse). Kernels: kernels/cpu/{ref,native}/optim.*, the multi-tensor
// list forms kernels/cpu/ref/multi_tensor.h and, on the CPU's native backend, a loop over the
// native single-tensor kernels defined below (CUDA: kernels/cuda/native/optim.h, registered in
// engine/register_cuda.cpp).
// Test: ctest --test-dir build -R "optim|multi_tensor"
#include "engine/ops/optim.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "engine/cuda_copy.h"
#include "engine/cuda_runtime.h"
#include "engine/dispatch.h"
#include "kernels/common/parallel.h"
#include "kernels/cpu/native/optim.h"
#include "kernels/cpu/ref/multi_tensor.h"
#include "kernels/cpu/ref/optim.h"

namespace kiln {
namespace {

#define KILN_SGD_STEP KILN_OP("optim_sgd", SGDStepDesc, void*, const void*, void*)
#define KILN_ADAM_STEP KILN_OP("optim_adam", AdamStepDesc, void*, const void*, void*, void*)
#define KILN_LARS_STEP KILN_OP("optim_lars", LarsStepDesc, void*, const void*, void*)
#define KILN_SUM_SQUARES KILN_OP("optim_sum_squares", VecDesc, const void*, double*)
#define KILN_SCALE KILN_OP("optim_scale", VecDesc, void*)
#define KILN_MULTI_STEP KILN_OP("optim_multi_tensor", MultiTensorDesc, const TensorListEntry*)
#define KILN_MULTI_SUM_SQUARES \
  KILN_OP("optim_multi_sum_squares", MultiTensorDesc, const TensorListEntry*, bool, double*)

std::atomic<int64_t> g_update_calls{0};

// Checks `t` (the parameter's `what`) against the parameter p.
void check_like(const Tensor& p, const Tensor& t, const char* op, const char* what) {
  KILN_CHECK(t.defined(), op, ": ", what, " is undefined (parameter ", p.str(), ")");
  KILN_CHECK(t.sizes() == p.sizes(), op, ": ", what, " ", shape_str(t.sizes()), " does not match parameter ",
             shape_str(p.sizes()));
  KILN_CHECK(t.dtype() == p.dtype(), op, ": ", what, " dtype ", t.dtype(), " does not match parameter dtype ",
             p.dtype());
  KILN_CHECK(t.device() == p.device(), op, ": ", what, " is on another device than the parameter");
  KILN_CHECK(t.is_contiguous(), op, ": ", what, " ", shape_str(t.sizes()), " must be contiguous");
}

void check_param(const Tensor& p, const char* op) {
  KILN_CHECK(p.defined(), op, ": undefined parameter");
  KILN_CHECK(p.dtype() == DType::float32 || p.dtype() == DType::float64, op, ": parameter ", p.str(),
             " must be float32 or float64");
  KILN_CHECK(p.is_contiguous(), op, ": parameter ", p.str(), " must be contiguous");
}

}  // namespace

namespace ops {

void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& buf, SGDStepDesc d) {
  check_param(param, "sgd_step");
  check_like(param, grad, "sgd_step", "gradient");
  if (d.momentum != 0) check_like(param, buf, "sgd_step", "momentum buffer");
  d.dtype = param.dtype();
  d.n = param.numel();
  ++g_update_calls;
  KILN_SGD_STEP(param.device().type, d, param.data_ptr(), grad.data_ptr(),
                d.momentum != 0 ? buf.data_ptr() : nullptr);
}

void adam_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, AdamStepDesc d) {
  check_param(param, "adam_step");
  check_like(param, grad, "adam_step", "gradient");
  check_like(param, m, "adam_step", "exp_avg");
  check_like(param, v, "adam_step", "exp_avg_sq");
  KILN_CHECK(d.step >= 1, "adam_step: step must be >= 1, got ", d.step);
  d.dtype = param.dtype();
  d.n = param.numel();
  ++g_update_calls;
  KILN_ADAM_STEP(param.device().type, d, param.data_ptr(), grad.data_ptr(), m.data_ptr(), v.data_ptr());
}

void lars_step(const Tensor& param, const Tensor& grad, const Tensor& buf, LarsStepDesc d) {
  check_param(param, "lars_step");
  check_like(param, grad, "lars_step", "gradient");
  check_like(param, buf, "lars_step", "momentum buffer");
  d.dtype = param.dtype();
  d.n = param.numel();
  ++g_update_calls;
  KILN_LARS_STEP(param.device().type, d, param.data_ptr(), grad.data_ptr(), buf.data_ptr());
}

double sum_squares(const Tensor& x0) {
  KILN_CHECK(x0.defined(), "sum_squares: undefined tensor");
  Tensor x = x0.dtype() == DType::float32 || x0.dtype() == DType::float64 ? x0 : x0.to(DType::float64);
  x = x.contiguous();
  VecDesc d;
  d.dtype = x.dtype();
  d.n = x.numel();
  if (x.device().is_cuda()) {  // the kernel writes its double where the data lives
    Tensor out = zeros({1}, TensorOptions(DType::float64).with_device(x.device()));
    KILN_SUM_SQUARES(x.device().type, d, x.data_ptr(), out.data<double>());
    return out.item();
  }
  double out = 0;
  KILN_SUM_SQUARES(x.device().type, d, x.data_ptr(), &out);
  return out;
}

void scale_(const Tensor& x, double s) {
  check_param(x, "scale_");
  VecDesc d;
  d.dtype = x.dtype();
  d.n = x.numel();
  d.scale = s;
  KILN_SCALE(x.device().type, d, x.data_ptr());
}

int64_t optim_update_calls() { return g_update_calls.load(); }

}  // namespace ops

// --- multi-tensor lists
namespace {

const char* multi_op_name(MultiTensorOp op) {
  return op == MultiTensorOp::sgd ? "multi_tensor_step(sgd)" : op == MultiTensorOp::adam ? "multi_tensor_step(adam)"
                                                                                        : "multi_tensor_step(lars)";
}

// The planned entries where the kernel reads them: the host vector itself on the CPU; on CUDA a
// device byte tensor `keep`, filled by an asynchronous copy (copy_bytes stages the host bytes in
// pinned memory and releases that buffer only after the copy's event, so nothing waits here).
// `keep` may be dropped once the kernel is queued: the caching allocator is stream-ordered, so
// its block is reused only by work queued after the kernel on this stream.
const TensorListEntry* place_entries(const std::vector<TensorListEntry>& entries, Device dev, Tensor& keep) {
  if (!dev.is_cuda() || entries.empty()) return entries.data();
  const size_t bytes = entries.size() * sizeof(TensorListEntry);
  keep = empty({int64_t(bytes)}, TensorOptions(DType::uint8).with_device(dev));
  cuda::copy_bytes(keep.data_ptr(), dev, entries.data(), Device(), bytes);
  return static_cast<const TensorListEntry*>(keep.data_ptr());
}

// Makes the tensors' CUDA device current for the call (the kernels launch on the current
// device's current stream); nothing on the CPU.
std::unique_ptr<cuda::DeviceGuard> device_scope(Device dev) {
  return dev.is_cuda() ? std::make_unique<cuda::DeviceGuard>(dev.index) : nullptr;
}

}  // namespace

namespace ops {

bool has_multi_tensor(Device device, DType dtype) {
  MultiTensorDesc d;
  d.dtype = dtype;
  return KILN_MULTI_STEP.find(device.type, d) != nullptr;
}

void multi_tensor_step(const std::vector<MultiTensorItem>& items, MultiTensorDesc d) {
  if (items.empty()) return;
  const char* op = multi_op_name(d.op);
  const Tensor& first = items[0].param;
  check_param(first, op);
  const Device dev = first.device();
  std::vector<TensorListEntry> entries(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    const MultiTensorItem& it = items[i];
    const std::string where = std::string(op) + " item " + std::to_string(i);
    check_param(it.param, where.c_str());
    KILN_CHECK(it.param.device() == dev && it.param.dtype() == first.dtype(), where, ": parameter ",
               it.param.str(), " is not on the list's device and dtype (", first.str(), ")");
    check_like(it.param, it.grad, where.c_str(), "gradient");
    const bool state0 = d.op != MultiTensorOp::sgd || d.sgd.momentum != 0;
    if (state0) check_like(it.param, it.state0, where.c_str(), d.op == MultiTensorOp::adam ? "exp_avg" : "momentum buffer");
    if (d.op == MultiTensorOp::adam) check_like(it.param, it.state1, where.c_str(), "exp_avg_sq");
    TensorListEntry& e = entries[i];
    e.param = it.param.data_ptr();
    e.grad = it.grad.data_ptr();
    e.state0 = state0 ? it.state0.data_ptr() : nullptr;
    e.state1 = d.op == MultiTensorOp::adam ? it.state1.data_ptr() : nullptr;
    e.n = it.param.numel();
    e.local_lr = it.local_lr;
  }
  if (d.op == MultiTensorOp::adam) KILN_CHECK(d.adam.step >= 1, op, ": step must be >= 1, got ", d.adam.step);
  KILN_CHECK(d.chunk > 0, op, ": chunk must be > 0, got ", d.chunk);
  d.dtype = first.dtype();
  d.count = int64_t(entries.size());
  d.total_chunks = plan_tensor_list(entries.data(), d.count, d.chunk);
  auto scope = device_scope(dev);
  Tensor keep;
  const TensorListEntry* placed = place_entries(entries, dev, keep);
  ++g_update_calls;
  KILN_MULTI_STEP(dev.type, d, placed);
}

std::vector<double> multi_sum_squares(const std::vector<Tensor>& xs0) {
  std::vector<Tensor> xs(xs0.size());
  // Groups of (device, dtype) in first-appearance order; the values do not depend on grouping.
  std::vector<std::pair<std::pair<Device, DType>, std::vector<size_t>>> groups;
  for (size_t i = 0; i < xs0.size(); ++i) {
    KILN_CHECK(xs0[i].defined(), "multi_sum_squares: tensor ", i, " is undefined");
    Tensor x = xs0[i].dtype() == DType::float32 || xs0[i].dtype() == DType::float64 ? xs0[i] : xs0[i].to(DType::float64);
    xs[i] = x.contiguous();
    const std::pair<Device, DType> key{xs[i].device(), xs[i].dtype()};
    auto g = std::find_if(groups.begin(), groups.end(), [&](auto& e) { return e.first == key; });
    if (g == groups.end()) g = groups.insert(groups.end(), {key, {}});
    g->second.push_back(i);
  }
  std::vector<double> out(xs.size(), 0.0);
  for (auto& [key, idx] : groups) {
    const auto [dev, dtype] = key;
    MultiTensorDesc d;
    d.dtype = dtype;
    if (!KILN_MULTI_SUM_SQUARES.find(dev.type, d)) {  // no list kernel here: one call per tensor
      for (size_t i : idx) out[i] = sum_squares(xs[i]);
      continue;
    }
    std::vector<TensorListEntry> entries(idx.size());
    for (size_t j = 0; j < idx.size(); ++j) {
      entries[j].param = xs[idx[j]].data_ptr();
      entries[j].n = xs[idx[j]].numel();
    }
    d.count = int64_t(entries.size());
    d.total_chunks = plan_tensor_list(entries.data(), d.count, d.chunk);
    std::vector<double> part(idx.size(), 0.0);
    auto scope = device_scope(dev);
    Tensor keep;
    const TensorListEntry* placed = place_entries(entries, dev, keep);
    if (dev.is_cuda()) {  // the kernel writes its doubles where the data lives; one read-back
      Tensor dev_out = zeros({d.count}, TensorOptions(DType::float64).with_device(dev));
      KILN_MULTI_SUM_SQUARES(dev.type, d, placed, false, dev_out.data<double>());
      part = dev_out.to(Device()).to_vector();
    } else {
      KILN_MULTI_SUM_SQUARES(dev.type, d, placed, false, part.data());
    }
    for (size_t j = 0; j < idx.size(); ++j) out[idx[j]] = part[j];
  }
  return out;
}

}  // namespace ops

// --- registration
namespace {

void ref_sgd(const SGDStepDesc& d, void* p, const void* g, void* b) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    ref::sgd_step<T>(d, static_cast<T*>(p), static_cast<const T*>(g), static_cast<T*>(b));
  });
}
void ref_adam(const AdamStepDesc& d, void* p, const void* g, void* m, void* v) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    ref::adam_step<T>(d, static_cast<T*>(p), static_cast<const T*>(g), static_cast<T*>(m), static_cast<T*>(v));
  });
}
void ref_lars(const LarsStepDesc& d, void* p, const void* g, void* b) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    ref::lars_step<T>(d, static_cast<T*>(p), static_cast<const T*>(g), static_cast<T*>(b));
  });
}
void ref_sum_squares(const VecDesc& d, const void* x, double* out) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    ref::sum_squares<T>(d, static_cast<const T*>(x), out);
  });
}
void ref_scale(const VecDesc& d, void* x) {
  visit_float(d.dtype, [&](auto tag) {
    using T = decltype(tag);
    ref::scale<T>(d, static_cast<T*>(x));
  });
}

// The single-tensor descriptor of entry e of a list (the ref's loop does the same).
template <class F>
void with_single_desc(const MultiTensorDesc& d, const TensorListEntry& e, const F& f) {
  switch (d.op) {
    case MultiTensorOp::sgd: {
      SGDStepDesc s = d.sgd;
      s.dtype = d.dtype, s.n = e.n;
      f(s);
      break;
    }
    case MultiTensorOp::adam: {
      AdamStepDesc s = d.adam;
      s.dtype = d.dtype, s.n = e.n;
      f(s);
      break;
    }
    case MultiTensorOp::lars: {
      LarsStepDesc s = d.lars;
      s.dtype = d.dtype, s.n = e.n, s.local_lr = e.local_lr;
      f(s);
      break;
    }
  }
}

// entry e's elements [lo, hi) as an entry of its own (pointers advanced, state0 kept null).
TensorListEntry sub_entry(const TensorListEntry& e, int64_t lo, int64_t hi, size_t elem) {
  const auto at = [&](const void* ptr) -> void* {
    return ptr ? static_cast<char*>(const_cast<void*>(ptr)) + size_t(lo) * elem : nullptr;
  };
  TensorListEntry s = e;
  s.param = at(e.param), s.grad = at(e.grad), s.state0 = at(e.state0), s.state1 = at(e.state1);
  s.n = hi - lo;
  return s;
}

void native_one_step(const MultiTensorDesc& d, const TensorListEntry& e) {
  with_single_desc(d, e, [&](const auto& s) {
    using S = std::decay_t<decltype(s)>;
    if constexpr (std::is_same_v<S, SGDStepDesc>) native::sgd_step(s, e.param, e.grad, e.state0);
    else if constexpr (std::is_same_v<S, AdamStepDesc>) native::adam_step(s, e.param, e.grad, e.state0, e.state1);
    else native::lars_step(s, e.param, e.grad, e.state0);
  });
}

// Below this many elements in all a list is updated by one thread (the native kernels' own grain).
constexpr int64_t kGrain = 16384;

// The whole list in ONE parallel region: the concatenated elements are split into one contiguous
// range per thread, and each thread runs the single-tensor native kernels on the pieces of the
// tensors in its range (inside the region they run serially: parallel_for never nests). One
// region instead of one per tensor matters where threads must be woken per region, above all on
// busy machines. Elementwise updates: the same bits for any split.
void native_multi_step(const MultiTensorDesc& d, const TensorListEntry* entries) {
  std::vector<int64_t> begin(size_t(d.count) + 1, 0);  // prefix offsets of the entries
  for (int64_t i = 0; i < d.count; ++i) begin[size_t(i) + 1] = begin[size_t(i)] + entries[i].n;
  const size_t elem = element_size(d.dtype);
  parallel_for(0, begin.back(), kGrain, [&](int64_t lo, int64_t hi) {
    int64_t i = int64_t(std::upper_bound(begin.begin(), begin.end(), lo) - begin.begin()) - 1;
    for (; i < d.count && begin[size_t(i)] < hi; ++i) {
      const int64_t a = std::max(lo, begin[size_t(i)]) - begin[size_t(i)];
      const int64_t b = std::min(hi, begin[size_t(i) + 1]) - begin[size_t(i)];
      if (a < b) native_one_step(d, sub_entry(entries[i], a, b, elem));
    }
  });
}

// Sums of squares need each tensor whole (native::sum_squares adds fixed blocks from the tensor's
// start, in order: the per-tensor bits): thread t takes the tensors that START in its share of
// the concatenated elements, all in one parallel region.
void native_multi_sum_squares(const MultiTensorDesc& d, const TensorListEntry* entries, bool of_grad, double* out) {
  int64_t total = 0;
  for (int64_t i = 0; i < d.count; ++i) total += entries[i].n;
  const int64_t parts = total < kGrain ? 1 : std::max(1, num_threads());
  parallel_for(0, parts, 1, [&](int64_t t0, int64_t t1) {
    int64_t start = 0;
    for (int64_t i = 0; i < d.count; ++i) {
      const int64_t owner = total == 0 ? 0 : std::min(parts - 1, start * parts / total);
      start += entries[i].n;
      if (owner < t0 || owner >= t1) continue;
      VecDesc v;
      v.dtype = d.dtype;
      v.n = entries[i].n;
      native::sum_squares(v, of_grad ? entries[i].grad : entries[i].param, out + i);
    }
  });
}

bool supports_multi_cpu(const MultiTensorDesc& d) {
  return (d.dtype == DType::float32 || d.dtype == DType::float64) && d.chunk > 0;
}

void ref_multi_step(const MultiTensorDesc& d, const TensorListEntry* entries) {
  visit_float(d.dtype, [&](auto tag) { ref::multi_tensor_step<decltype(tag)>(d, entries); });
}

void ref_multi_sum_squares(const MultiTensorDesc& d, const TensorListEntry* entries, bool of_grad, double* out) {
  visit_float(d.dtype, [&](auto tag) { ref::multi_tensor_sum_squares<decltype(tag)>(d, entries, of_grad, out); });
}

}  // namespace

void register_optim_kernels(Registry& r) {
  constexpr auto cpu = DeviceType::cpu;
  auto& sgd = r.op<SGDStepDesc, void*, const void*, void*>("optim_sgd");
  sgd.add("native", cpu, native::supports_optim_sgd, native::sgd_step);
  sgd.add("ref", cpu, native::supports_optim_sgd, ref_sgd);
  auto& adam = r.op<AdamStepDesc, void*, const void*, void*, void*>("optim_adam");
  adam.add("native", cpu, native::supports_optim_adam, native::adam_step);
  adam.add("ref", cpu, native::supports_optim_adam, ref_adam);
  auto& lars = r.op<LarsStepDesc, void*, const void*, void*>("optim_lars");
  lars.add("native", cpu, native::supports_optim_lars, native::lars_step);
  lars.add("ref", cpu, native::supports_optim_lars, ref_lars);
  auto& ss = r.op<VecDesc, const void*, double*>("optim_sum_squares");
  ss.add("native", cpu, native::supports_optim_vec, native::sum_squares);
  ss.add("ref", cpu, native::supports_optim_vec, ref_sum_squares);
  auto& sc = r.op<VecDesc, void*>("optim_scale");
  sc.add("native", cpu, native::supports_optim_vec, native::scale);
  sc.add("ref", cpu, native::supports_optim_vec, ref_scale);
  auto& multi = r.op<MultiTensorDesc, const TensorListEntry*>("optim_multi_tensor");
  multi.add("native", cpu, supports_multi_cpu, native_multi_step);
  multi.add("ref", cpu, supports_multi_cpu, ref_multi_step);
  auto& mss = r.op<MultiTensorDesc, const TensorListEntry*, bool, double*>("optim_multi_sum_squares");
  mss.add("native", cpu, supports_multi_cpu, native_multi_sum_squares);
  mss.add("ref", cpu, supports_multi_cpu, ref_multi_sum_squares);
}

}  // namespace kiln
