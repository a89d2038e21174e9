// Test harness shared by every op test:
//  - check_close: elementwise |a - b| <= atol + rtol * |b|, with the worst element in the message;
//  - against_ref: run an op in double on the `ref` backend (the oracle) and in float32 on another
//    backend, and compare outputs and input gradients;
//  - gradcheck: analytic gradients (backward) against central finite differences, in double on
//    the `ref` backend (or another one, GradcheckOptions::backend);
//  - CHECK_THROWS_KILN(expr, "substring"): expr throws kiln::Error whose message has the substring;
//  - TempDir: a fresh directory for files a test writes, removed at scope exit;
//  - near / first_mismatch / max_abs_diff / max_rel_diff: the elementwise tolerance every
//    comparison here uses (a NaN or infinity where the reference is finite never passes);
//  - skip_missing / need_python / need_path: a dependency that is not there makes the test
//    Skipped (exit 77, "SKIPPED: <reason>" in the log), or failed under CI=true.
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

// ---- Missing dependencies: Skipped, never Passed ---------------------------------------------
// A test that cannot run for want of something outside kiln (a Python package, a data set, a
// program, an optional backend) calls skip_missing(what, reason) and returns. It prints
//   SKIPPED: <what>: <reason>
// on stdout (the line .ci/run's summary greps from CTest's log) and marks the process, so that
// main (tests/support/main.cpp, tests/mpi/main.cpp) returns 77 when nothing failed: CTest's
// SKIP_RETURN_CODE reports the test Skipped. Under CI=true (the environment variable) the
// dependency is required (tools/install-deps.sh --all --test installs it): the current test case
// fails with "MISSING (required with CI=true): <what>: <reason>" instead. A file that skips is
// skipped as a whole (CTest counts per file): dependency-bound cases live in files of their own.
void skip_missing(const std::string& what, const std::string& reason);
// Skipped whatever CI says: for a part this build is configured without by design (cuDNN in the
// emulated-device build), which no install step could supply.
void skip_not_built(const std::string& what, const std::string& reason);
// Whether CI is "true" in the environment.
bool in_ci();
// Whether skip_missing() marked this process (outside CI).
bool skipped();
// The process exit code for doctest's `rc`: 77 when rc is 0 and a test was skipped, else rc.
int exit_code(int rc);

// The Python the tests check kiln's files with: KILN_TEST_PYTHON, the venv of
// tools/install-deps.sh --test (tensorboard, safetensors, numpy, onnx, onnxruntime).
std::string python();
// Whether python() imports every module of `modules` ("safetensors.numpy, numpy"); if not,
// skip_missing() names them and the venv, and the caller returns.
bool need_python(const std::string& modules);
// Whether `path` exists; if not, skip_missing(what, "<path> not found (<hint>)").
bool need_path(const std::string& path, const std::string& what, const std::string& hint);
// Runs `cmd` through the shell and returns its stdout; *rc: its exit status (0 on success).
std::string run_capture(const std::string& cmd, int* rc);
// 'text' for the shell (single quotes, embedded ones escaped).
std::string shell_quote(const std::string& text);
// This test executable as the start of a shell command, to run it again with other arguments: its
// path, behind the emulator in a cross build (qemu-user; tests/CMakeLists.txt KILN_TEST_EMULATOR),
// where /proc/<pid>/exe is the emulator itself.
std::string self_command();

// ---- Comparisons that see NaN -----------------------------------------------------------------
// |got - want| <= tol, where a NaN matches only a NaN and an infinity only the same infinity: a
// NaN or infinity in `got` where `want` is finite fails, and so does a finite `got` where `want`
// is not. Every comparison helper of the tests goes through it (or the same rule).
bool near(double got, double want, double tol);
// |got - want| under the same rule: 0 for matching NaNs or infinities, +inf for any other
// non-finite pair.
double abs_diff(double got, double want);
// The first index where got[i] is not near want[i] within atol + rtol * |want[i]|; -1 if none.
// A size mismatch is a mismatch at min(sizes).
int64_t first_mismatch(const std::vector<double>& got, const std::vector<double>& want, double rtol, double atol);
// max_i abs_diff(got[i], want[i]) (+inf on a size mismatch or a non-finite pair that differs).
double max_abs_diff(const std::vector<double>& got, const std::vector<double>& want);
// max_i abs_diff(got[i], want[i]) / (1 + |want[i]|), the same way.
double max_rel_diff(const std::vector<double>& got, const std::vector<double>& want);
template <class T>
std::vector<double> as_doubles(const std::vector<T>& v) {
  return std::vector<double>(v.begin(), v.end());
}

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
  // The backend f runs on (strict: an op it lacks is an error, never a silent fallback to ref),
  // in float64. "ref" is the oracle; "native" checks native's own float64 kernels.
  std::string backend = "ref";
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
