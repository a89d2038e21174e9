// Op wrappers of the optimizer family: argument checks, dispatch, registration. The updates write
// through data pointers, outside autograd (parameters are leaves that require grad, which the
// in-place Tensor methods refuse). Kernels: kernels/cpu/{ref,native}/optim.*, the multi-tensor
// list forms kernels/cpu/ref/multi_tensor.h and, on the CPU's native backend, a loop over the
// native single-tensor kernels defined below (CUDA: kernels/cuda/native/optim.h, registered in
// engine/backends/cuda_native.cpp).
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

namespace kiln {
namespace {


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
  param.bump_version();
  dispatch<kernel_op::sgd_step>(param.device().type, d, param.data_ptr(), grad.data_ptr(),
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
  param.bump_version();
  dispatch<kernel_op::adam_step>(param.device().type, d, param.data_ptr(), grad.data_ptr(), m.data_ptr(), v.data_ptr());
}

void lars_step(const Tensor& param, const Tensor& grad, const Tensor& buf, LarsStepDesc d) {
  check_param(param, "lars_step");
  check_like(param, grad, "lars_step", "gradient");
  check_like(param, buf, "lars_step", "momentum buffer");
  d.dtype = param.dtype();
  d.n = param.numel();
  ++g_update_calls;
  param.bump_version();
  dispatch<kernel_op::lars_step>(param.device().type, d, param.data_ptr(), grad.data_ptr(), buf.data_ptr());
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
    dispatch<kernel_op::sum_squares>(x.device().type, d, x.data_ptr(), out.data<double>());
    return out.item();
  }
  double out = 0;
  dispatch<kernel_op::sum_squares>(x.device().type, d, x.data_ptr(), &out);
  return out;
}

void scale_(const Tensor& x, double s) {
  check_param(x, "scale_");
  VecDesc d;
  d.dtype = x.dtype();
  d.n = x.numel();
  d.scale = s;
  x.bump_version();
  dispatch<kernel_op::scale>(x.device().type, d, x.data_ptr());
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
  return find_kernel<kernel_op::multi_tensor_step>(device.type, d) != nullptr;
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
  for (const MultiTensorItem& it : items) it.param.bump_version();
  dispatch<kernel_op::multi_tensor_step>(dev.type, d, placed);
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
    if (!find_kernel<kernel_op::multi_tensor_sum_squares>(dev.type, d)) {  // no list kernel here: one call per tensor
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
      dispatch<kernel_op::multi_tensor_sum_squares>(dev.type, d, placed, false, dev_out.data<double>());
      part = dev_out.to(Device()).to_vector();
    } else {
      dispatch<kernel_op::multi_tensor_sum_squares>(dev.type, d, placed, false, part.data());
    }
    for (size_t j = 0; j < idx.size(); ++j) out[idx[j]] = part[j];
  }
  return out;
}

}  // namespace ops


}  // namespace kiln
