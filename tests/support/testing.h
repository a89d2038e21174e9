// Test harness shared by every op test:
//  - check_close: elementwise |a - b| <= atol + rtol * |b|, with the worst element in the message;
//  - against_ref: run an op in double on the `ref` backend (the oracle) and in float32 on another
//    backend, and compare outputs and input gradients;
//  - gradcheck: analytic gradients (backward) against central finite differences, in double on
//    the `ref` backend;
//  - CHECK_THROWS_KILN(expr, "substring"): expr throws kiln::Error whose message has the substring;
//  - TempDir: a fresh directory for files a test writes, removed at scope exit.
#pragma once

#include <doctest/doctest.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/dispatch.h"
#include "engine/random.h"
#include "engine/tensor.h"

namespace kiln::test {

// A fresh, empty directory under the system temp dir, unique to the process and the instance
// ("kiln_<tag>_<pid>_<n>"), removed with everything in it when the object goes.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& tag = "test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string operator/(const std::string& name) const { return (path / name).string(); }
  // File names in the directory (to spot leftovers).
  std::vector<std::string> names() const;
};

// Uniform values in [lo, hi) from a fixed seed.
Tensor make_input(const Shape& shape, uint64_t seed, DType dtype = DType::float64, double lo = -1, double hi = 1);

// The same values as `t`, in a tensor whose strides are not contiguous (a transposed copy viewed
// back, or a strided slice of a larger buffer for 1-d).
Tensor non_contiguous(const Tensor& t);

// Returns "" if close, else a description of the worst mismatch.
std::string compare(const Tensor& actual, const Tensor& expected, double rtol, double atol);
#define CHECK_CLOSE(actual, expected, rtol, atol)                                         \
  do {                                                                                    \
    std::string kiln_msg_ = ::kiln::test::compare((actual), (expected), (rtol), (atol)); \
    CHECK_MESSAGE(kiln_msg_.empty(), kiln_msg_);                                          \
  } while (0)

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

struct GradcheckOptions {
  double eps = 1e-6;
  double rtol = 1e-5;
  double atol = 1e-6;
  uint64_t seed = 7;  // for the random weighting of the output
};
// f must be deterministic. inputs: float64 tensors; those with requires_grad are checked.
// Returns "" on success, else which input/element disagreed and by how much.
std::string gradcheck(const Fn& f, const std::vector<Tensor>& inputs, GradcheckOptions opt = {});
#define CHECK_GRAD(f, inputs, ...)                                                           \
  do {                                                                                       \
    std::string kiln_msg_ = ::kiln::test::gradcheck((f), (inputs), ##__VA_ARGS__);           \
    CHECK_MESSAGE(kiln_msg_.empty(), kiln_msg_);                                             \
  } while (0)

struct RefCompareOptions {
  std::string backend = "native";
  DType dtype = DType::float32;
  double rtol = 1e-4;
  double atol = 1e-5;
  bool grads = true;  // also compare input gradients (of sum(out * w))
  uint64_t seed = 11;
};
// Runs f on float64 copies of `inputs` with the ref backend, and on `opt.dtype` copies with
// opt.backend; compares outputs and gradients. Inputs that require grad get gradients compared.
std::string against_ref(const Fn& f, const std::vector<Tensor>& inputs, RefCompareOptions opt = {});
#define CHECK_AGAINST_REF(f, inputs, ...)                                                    \
  do {                                                                                       \
    std::string kiln_msg_ = ::kiln::test::against_ref((f), (inputs), ##__VA_ARGS__);         \
    CHECK_MESSAGE(kiln_msg_.empty(), kiln_msg_);                                             \
  } while (0)

}  // namespace kiln::test

#define CHECK_THROWS_KILN(expr, substr)                                                      \
  do {                                                                                       \
    bool kiln_threw_ = false;                                                                \
    try {                                                                                    \
      (void)(expr);                                                                          \
    } catch (const ::kiln::Error& e) {                                                       \
      kiln_threw_ = true;                                                                    \
      CHECK_MESSAGE(std::string(e.what()).find(substr) != std::string::npos,                \
                    "message was: " << std::string(e.what()));                                            \
    }                                                                                        \
    CHECK_MESSAGE(kiln_threw_, #expr " did not throw kiln::Error");                        \
  } while (0)
