// Multi-tensor optimizer steps on the CPU: a whole parameter list per call, on the native
// single-tensor kernels (kernels/cpu/native/optim.h). Test: ctest --test-dir build -R 'multi_tensor|oracle'
#include "kernels/cpu/native/multi_tensor.h"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "kernels/common/parallel.h"
#include "kernels/cpu/native/optim.h"

namespace kiln::native {
namespace {

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
    if constexpr (std::is_same_v<S, SGDStepDesc>) sgd_step(s, e.param, e.grad, e.state0);
    else if constexpr (std::is_same_v<S, AdamStepDesc>) adam_step(s, e.param, e.grad, e.state0, e.state1);
    else lars_step(s, e.param, e.grad, e.state0);
  });
}

}  // namespace

// Below this many elements in all a list is updated by one thread (the native kernels' own grain).
constexpr int64_t kGrain = 16384;

// The whole list in ONE parallel region: the concatenated elements are split into one contiguous
// range per thread, and each thread runs the single-tensor native kernels on the pieces of the
// tensors in its range (inside the region they run serially: parallel_for never nests). One
// region instead of one per tensor matters where threads must be woken per region, above all on
// busy machines. Elementwise updates: the same bits for any split.
void multi_tensor_step(const MultiTensorDesc& d, const TensorListEntry* entries) {
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

// Sums of squares need each tensor whole (sum_squares adds fixed blocks from the tensor's
// start, in order: the per-tensor bits): thread t takes the tensors that START in its share of
// the concatenated elements, all in one parallel region.
void multi_tensor_sum_squares(const MultiTensorDesc& d, const TensorListEntry* entries, bool of_grad, double* out) {
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
      sum_squares(v, of_grad ? entries[i].grad : entries[i].param, out + i);
    }
  });
}


bool supports_multi_tensor(const MultiTensorDesc& d) {
  return (d.dtype == DType::float32 || d.dtype == DType::float64) && d.chunk > 0;
}

}  // namespace kiln::native
