// The table-driven op harness of test_gpu_ops.cpp (ops on a device; the kernels themselves are
// the oracle's, tests/oracle): an OpCase is {name, inputs, fn, tolerances};
// run_cases() runs each on the CPU oracle (float64, the `ref` backend first, on the values the GPU
// sees) and on cuda:0 under each GPU backend (gpu_compare.h), forward and backward (the gradient
// of sum(output * w) for fixed weights w), and compares outputs and input gradients; a case that
// throws is reported and the others still run. Header only (tests/gpu/*.cpp are CTest entries).
//   ctest --test-dir build -L gpu -R gpu_ops --output-on-failure
#pragma once

#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "engine/dispatch.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"
#include "tests/gpu/gpu_compare.h"
#include "tests/support/testing.h"

namespace kiln::gputest {

using Outs = std::vector<Tensor>;
using MultiFn = std::function<Outs(const std::vector<Tensor>&)>;

struct OpCase {
  std::string name;
  std::vector<Tensor> inputs;  // CPU float64 (or int64 targets); requires_grad: gradient compared
  MultiFn fn;                  // every output is compared; floating ones that need grad are back-propagated
  double rtol = 1e-4, atol = 1e-4;
  bool channels_last = false;  // 4-d floating inputs go NHWC on both sides
  int half_inputs = -1;        // half-precision runs: how many leading inputs take the half dtype
                               // (-1: all; batch norm's parameters and statistics stay float32)
};

// Uniform in [lo, hi), float64, rounded to float32 values (both sides see the same numbers).
inline Tensor in(const Shape& s, uint64_t seed, double lo = -1, double hi = 1, bool grad = true) {
  Tensor t = test::make_input(s, seed, DType::float32, lo, hi).to(DType::float64);
  t.requires_grad_(grad);
  return t;
}
inline Tensor buf(const Shape& s, uint64_t seed, double lo = -1, double hi = 1) { return in(s, seed, lo, hi, false); }
// Distinct values on a 1/8 grid in a seeded order (exact in float32: ties neither side breaks
// differently, so indices compare exactly).
inline Tensor distinct(const Shape& s, uint64_t seed, bool grad = true) {
  const int64_t n = shape_numel(s);
  std::vector<double> v(static_cast<size_t>(n));
  uint64_t x = seed * 2654435761ULL + 1;
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = double(i - n / 2) / 8;
  for (int64_t i = n - 1; i > 0; --i) {  // Fisher-Yates with a small LCG
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    std::swap(v[size_t(i)], v[size_t((x >> 33) % uint64_t(i + 1))]);
  }
  Tensor t = from_vector(v, s, TensorOptions(DType::float64));
  t.requires_grad_(grad);
  return t;
}

struct Side {
  Outs outs;   // on the host
  Outs grads;  // on the host, one per input that requires grad (undefined if none arrived)
};

// How one side runs: on `dev`, floating inputs in `dt` (those past OpCase::half_inputs in
// `rest`), their values first rounded to `grid` (the GPU run's dtype: the oracle sees the numbers
// the GPU sees; the output weights of the backward pass are rounded to it too).
struct Run {
  Device dev;
  DType dt, rest, grid;
};

// Runs `c` as `r` says. The caller holds the backend guard.
inline Side run_side(const OpCase& c, const Run& r) {
  std::vector<Tensor> ins;
  for (size_t k = 0; k < c.inputs.size(); ++k) {
    const Tensor& t = c.inputs[k];
    if (!t.defined()) {
      ins.push_back(t);
      continue;
    }
    Tensor x = t.detach();
    if (x.is_floating_point()) {
      const bool half = c.half_inputs < 0 || int(k) < c.half_inputs;
      // A fresh buffer: in-place ops (running stats) must not touch c.inputs.
      x = x.to(half ? r.grid : DType::float32).to(half ? r.dt : r.rest).clone();
      if (c.channels_last && x.dim() == 4) x = x.contiguous(MemoryFormat::channels_last);
    }
    x = x.to(r.dev);
    if (t.requires_grad()) x.requires_grad_(true);
    ins.push_back(x);
  }
  Outs ys = c.fn(ins);
  Tensor loss;
  for (size_t k = 0; k < ys.size(); ++k) {
    if (!ys[k].defined() || !ys[k].requires_grad()) continue;
    CHECK_MESSAGE(ys[k].device() == r.dev, "output " << k << " is on " << ys[k].device().str());
    Tensor w =
        test::make_input(ys[k].sizes(), 100 + k, DType::float64, 0.5, 1.5).to(r.grid).to(ys[k].dtype()).to(r.dev);
    Tensor term = ops::sum(ops::mul(ys[k], w));
    loss = loss.defined() ? ops::add(loss, term) : term;
  }
  if (loss.defined()) loss.backward();
  Side s;
  for (const Tensor& y : ys) s.outs.push_back(to_host(y));
  for (size_t k = 0; k < ins.size(); ++k)
    if (c.inputs[k].defined() && c.inputs[k].requires_grad()) s.grads.push_back(to_host(ins[k].grad()));
  return s;
}

// "" when every output and gradient of `got` is within the case's tolerances of `want` (integer
// outputs exactly; a NaN or infinity where the oracle is finite never passes: test::compare),
// else one line per mismatch.
inline std::string side_mismatch(const OpCase& c, const Side& got, const Side& want) {
  if (got.outs.size() != want.outs.size())
    return "output counts differ: " + std::to_string(got.outs.size()) + " vs " + std::to_string(want.outs.size());
  if (got.grads.size() != want.grads.size())
    return "gradient counts differ: " + std::to_string(got.grads.size()) + " vs " + std::to_string(want.grads.size());
  std::string all;
  for (size_t k = 0; k < want.outs.size(); ++k) {
    const bool exact = want.outs[k].defined() && !want.outs[k].is_floating_point();
    const std::string m = test::compare(got.outs[k], want.outs[k], exact ? 0.0 : c.rtol, exact ? 0.0 : c.atol);
    if (!m.empty()) all += "output " + std::to_string(k) + ": " + m + "\n";
  }
  for (size_t k = 0; k < want.grads.size(); ++k) {
    const std::string m = test::compare(got.grads[k], want.grads[k], c.rtol, c.atol);
    if (!m.empty()) all += "gradient of the " + std::to_string(k) + "-th input that requires grad: " + m + "\n";
  }
  return all;
}

inline void compare_sides(const OpCase& c, const Side& got, const Side& want) {
  const std::string m = side_mismatch(c, got, want);
  CHECK_MESSAGE(m.empty(), m);
}

// Each case on the CPU oracle, then on cuda:0 in `gpu_dt` under each GPU backend.
inline void run_cases(const std::vector<OpCase>& cases, DType gpu_dt = DType::float32) {
  const Run oracle{Device(), DType::float64, DType::float64, gpu_dt};
  const Run gpu{kGpu, gpu_dt, DType::float32, gpu_dt};
  for (const OpCase& c : cases) {
    CAPTURE(c.name);
    CAPTURE(gpu_dt);
    std::string shapes;
    for (const Tensor& t : c.inputs) shapes += (t.defined() ? shape_str(t.sizes()) : std::string("-")) + " ";
    CAPTURE(shapes);
    Side want;
    try {
      BackendGuard g("ref", /*strict=*/false);
      want = run_side(c, oracle);
    } catch (const Error& e) {
      FAIL_CHECK("CPU oracle threw: " << std::string(e.what()));
      continue;
    }
    for (const auto& b : kGpuBackends) {
      const std::string backend = b.name;
      CAPTURE(backend);
      try {
        BackendGuard g(b.name, b.strict);
        Side got = run_side(c, gpu);
        compare_sides(c, got, want);
      } catch (const Error& e) {  // one op without a GPU kernel must not hide the others
        FAIL_CHECK("threw on cuda: " << std::string(e.what()));
      }
    }
  }
}

using V = const std::vector<Tensor>&;

}  // namespace kiln::gputest
