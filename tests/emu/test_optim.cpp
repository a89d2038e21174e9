// kiln's own CUDA optimizer kernels (kernels/cuda/native/optim.cu) under the emulator against
// kernels/cpu/ref/optim.h and the multi-tensor ref (kernels/cpu/ref/multi_tensor.h): SGD (every
// momentum/nesterov/decay/first combination), Adam and AdamW, LARS, sum_squares and scale on
// 1, 7, 33, 255, 1000 elements, then multi-tensor lists (update, per-tensor sums of squares)
// with empty and multi-chunk entries; and lists laid out as engine/ops/optim.cpp plans them (the
// default 65536-element chunk, a tensor over two chunks, SGD without momentum whose entries carry
// no buffer, a first SGD step).
// Elementwise updates run the ref's operations in the ref's order, so float64 AND float32 are
// compared EXACTLY (the emulator compiles the kernels as C++ without FMA contraction; on a GPU,
// nvcc's contraction changes the last bit, which the gpu tests allow for). sum_squares: 1e-13
// relative in double (tree versus sequential order).
//   Run: ctest --test-dir build -R emu.test_optim
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/ref/multi_tensor.h"
#include "kernels/cpu/ref/optim.h"
#include "kernels/cuda/native/optim.h"

using namespace kiln;

namespace {

template <class T>
std::vector<T> rnd(size_t n, uint64_t seed, double lo = -1, double hi = 1) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<T> v(n);
  for (T& x : v) x = T(u(g));
  return v;
}

template <class T>
DType dtype_of() {
  return sizeof(T) == 8 ? DType::float64 : DType::float32;
}

template <class T>
void sgd_cases() {
  for (int64_t n : {1, 7, 33, 255, 1000})
    for (int key = 0; key < 16; ++key) {
      SGDStepDesc d;
      d.dtype = dtype_of<T>(), d.n = n, d.lr = 0.05;
      d.momentum = key & 1 ? 0.9 : 0, d.nesterov = (key & 2) != 0, d.weight_decay = key & 4 ? 1e-3 : 0;
      d.first = (key & 8) != 0, d.dampening = d.nesterov ? 0 : 0.1;
      CAPTURE(d.str());
      const size_t un = size_t(n);
      std::vector<T> p = rnd<T>(un, 1), g = rnd<T>(un, 2), b = rnd<T>(un, 3);
      std::vector<T> pr = p, br = b;
      cuda::sgd_step(d, p.data(), g.data(), d.momentum != 0 ? b.data() : nullptr);
      ref::sgd_step<T>(d, pr.data(), g.data(), br.data());
      CHECK(p == pr);
      if (d.momentum != 0) CHECK(b == br);
    }
}

template <class T>
void adam_lars_cases() {
  for (int64_t n : {1, 7, 33, 255, 1000}) {
    const size_t un = size_t(n);
    for (int key = 0; key < 4; ++key) {
      AdamStepDesc d;
      d.dtype = dtype_of<T>(), d.n = n, d.step = 1 + 3 * key;
      d.weight_decay = key & 1 ? 0.01 : 0, d.decoupled = (key & 2) != 0;
      CAPTURE(d.str());
      std::vector<T> p = rnd<T>(un, 4), g = rnd<T>(un, 5), m = rnd<T>(un, 6), v = rnd<T>(un, 7, 0, 1);
      std::vector<T> pr = p, mr = m, vr = v;
      cuda::adam_step(d, p.data(), g.data(), m.data(), v.data());
      ref::adam_step<T>(d, pr.data(), g.data(), mr.data(), vr.data());
      CHECK(p == pr);
      CHECK(m == mr);
      CHECK(v == vr);
    }
    for (double wd : {0.0, 5e-4}) {
      LarsStepDesc d;
      d.dtype = dtype_of<T>(), d.n = n, d.local_lr = 0.37, d.weight_decay = wd;
      CAPTURE(d.str());
      std::vector<T> p = rnd<T>(un, 8), g = rnd<T>(un, 9), b = rnd<T>(un, 10);
      std::vector<T> pr = p, br = b;
      cuda::lars_step(d, p.data(), g.data(), b.data());
      ref::lars_step<T>(d, pr.data(), g.data(), br.data());
      CHECK(p == pr);
      CHECK(b == br);
    }
    VecDesc v;
    v.dtype = dtype_of<T>(), v.n = n, v.scale = 0.3;
    std::vector<T> x = rnd<T>(un, 11), xr = x;
    double s = -1, sr = -2;
    cuda::sum_squares(v, x.data(), &s);
    ref::sum_squares<T>(v, xr.data(), &sr);
    CHECK(std::abs(s - sr) <= 1e-13 * sr);
    cuda::scale(v, x.data());
    ref::scale<T>(v, xr.data());
    CHECK(x == xr);
  }
}

// A list of entries over separate arrays; returns the arrays (owning) and fills entries.
template <class T>
struct TensorList {
  std::vector<std::vector<T>> p, g, s0, s1;
  std::vector<TensorListEntry> entries;
  TensorList(const std::vector<int64_t>& sizes, uint64_t seed) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      const size_t n = size_t(sizes[i]);
      p.push_back(rnd<T>(n, seed + 10 * i));
      g.push_back(rnd<T>(n, seed + 10 * i + 1));
      s0.push_back(rnd<T>(n, seed + 10 * i + 2));
      s1.push_back(rnd<T>(n, seed + 10 * i + 3, 0, 1));
    }
    for (size_t i = 0; i < sizes.size(); ++i) {
      TensorListEntry e;
      e.param = p[i].data(), e.grad = g[i].data(), e.state0 = s0[i].data(), e.state1 = s1[i].data();
      e.n = sizes[i], e.local_lr = 0.5 + 0.1 * double(i);
      entries.push_back(e);
    }
  }
};

template <class T>
void multi_cases() {
  const std::vector<int64_t> sizes = {1000, 0, 7, 3 * 1024 + 3, 33, 0};
  for (MultiTensorOp op : {MultiTensorOp::sgd, MultiTensorOp::adam, MultiTensorOp::lars}) {
    MultiTensorDesc d;
    d.op = op, d.dtype = dtype_of<T>(), d.chunk = 1024;
    d.sgd.momentum = 0.9, d.sgd.weight_decay = 1e-4, d.sgd.nesterov = true;
    d.adam.weight_decay = 0.01, d.adam.decoupled = true, d.adam.step = 5;
    d.lars.weight_decay = 5e-4;
    TensorList<T> dev(sizes, 100), host(sizes, 100);
    d.count = int64_t(sizes.size());
    d.total_chunks = plan_tensor_list(dev.entries.data(), d.count, d.chunk);
    plan_tensor_list(host.entries.data(), d.count, d.chunk);
    CAPTURE(d.str());
    CHECK(d.total_chunks == 1 + 0 + 1 + 4 + 1 + 0);
    // The entry array is "device memory" here: the emulator's device memory is host memory.
    cuda::multi_tensor_step(d, dev.entries.data());
    ref::multi_tensor_step<T>(d, host.entries.data());
    for (size_t i = 0; i < sizes.size(); ++i) {
      CAPTURE(i);
      CHECK(dev.p[i] == host.p[i]);
      CHECK(dev.s0[i] == host.s0[i]);
      CHECK(dev.s1[i] == host.s1[i]);
    }
  }
}

}  // namespace

TEST_CASE("emu sgd_step against ref, exactly (float64, float32)") {
  sgd_cases<double>();
  sgd_cases<float>();
}

TEST_CASE("emu adam_step, lars_step, sum_squares, scale against ref") {
  adam_lars_cases<double>();
  adam_lars_cases<float>();
}

TEST_CASE("emu sum_squares over many blocks: fixed partials, same bits twice") {
  VecDesc v;
  v.n = 70001;  // 18 partial blocks
  const std::vector<float> x = rnd<float>(size_t(v.n), 12);
  double s1 = 0, s2 = 0, sr = 0;
  cuda::sum_squares(v, x.data(), &s1);
  cuda::sum_squares(v, x.data(), &s2);
  ref::sum_squares<float>(v, x.data(), &sr);
  CHECK(s1 == s2);
  CHECK(std::abs(s1 - sr) <= 1e-12 * sr);
}

TEST_CASE("emu multi_tensor_sum_squares: per-tensor sums of squares of params and grads") {
  const std::vector<int64_t> sizes = {0, 1000, 7, 3 * 1024 + 3, 0, 33};
  TensorList<float> list(sizes, 200);
  MultiTensorDesc d;
  d.chunk = 1024, d.count = int64_t(sizes.size());
  d.total_chunks = plan_tensor_list(list.entries.data(), d.count, d.chunk);
  for (bool of_grad : {false, true}) {
    CAPTURE(of_grad);
    std::vector<double> out(sizes.size(), -1.0), ref_out(sizes.size(), -2.0);
    cuda::multi_tensor_sum_squares(d, list.entries.data(), of_grad, out.data());
    ref::multi_tensor_sum_squares<float>(d, list.entries.data(), of_grad, ref_out.data());
    for (size_t i = 0; i < sizes.size(); ++i) {
      CAPTURE(i);
      CHECK(std::abs(out[i] - ref_out[i]) <= 1e-13 * ref_out[i]);  // tree versus sequential order
    }
  }
}

TEST_CASE("emu multi_tensor lists as the engine plans them: default chunk, null buffers, first step") {
  const std::vector<int64_t> sizes = {1, 65536 + 5, 0, 7, 4097};
  MultiTensorDesc d;
  CHECK(d.chunk == 65536);  // engine/ops/optim.cpp keeps the descriptor's default
  d.count = int64_t(sizes.size());
  for (int key = 0; key < 2; ++key) {
    d.op = MultiTensorOp::sgd;
    d.sgd.lr = 0.1, d.sgd.momentum = key ? 0.9 : 0, d.sgd.first = key == 1, d.sgd.weight_decay = 1e-3;
    CAPTURE(d.sgd.str());
    TensorList<float> dev(sizes, 300), host(sizes, 300);
    if (key == 0)  // SGD without momentum: ops::multi_tensor_step passes no buffer
      for (TensorListEntry& e : dev.entries) e.state0 = nullptr, e.state1 = nullptr;
    d.total_chunks = plan_tensor_list(dev.entries.data(), d.count, d.chunk);
    plan_tensor_list(host.entries.data(), d.count, d.chunk);
    CHECK(d.total_chunks == 1 + 2 + 0 + 1 + 1);
    CHECK(dev.entries[2].chunk_begin == 3);
    CHECK(dev.entries[3].chunk_begin == 3);  // the empty entry shares its successor's first chunk
    cuda::multi_tensor_step(d, dev.entries.data());
    ref::multi_tensor_step<float>(d, host.entries.data());
    for (size_t i = 0; i < sizes.size(); ++i) {
      CAPTURE(i);
      CHECK(dev.p[i] == host.p[i]);
      CHECK(dev.s0[i] == host.s0[i]);  // untouched without momentum
    }
  }
  TensorList<float> list(sizes, 400);
  d.total_chunks = plan_tensor_list(list.entries.data(), d.count, d.chunk);
  std::vector<double> out(sizes.size(), -1.0), ref_out(sizes.size(), -2.0);
  cuda::multi_tensor_sum_squares(d, list.entries.data(), false, out.data());
  ref::multi_tensor_sum_squares<float>(d, list.entries.data(), false, ref_out.data());
  for (size_t i = 0; i < sizes.size(); ++i) CHECK(std::abs(out[i] - ref_out[i]) <= 1e-13 * ref_out[i]);
}

TEST_CASE("emu multi_tensor_step (sgd, adam, lars) against the per-tensor ref") {
  multi_cases<double>();
  multi_cases<float>();
}
