#include "tests/support/testing.h"

#include "tests/support/grad_inputs.h"

#include <unistd.h>

#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <numeric>
#include <random>
#include <sstream>

#include "engine/gradcheck.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"

namespace kiln::test {

TempDir::TempDir(const std::string& tag) {
  static std::atomic<int> counter{0};
  path = std::filesystem::temp_directory_path() /
         ("kiln_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  std::filesystem::remove_all(path);
  std::filesystem::create_directories(path);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

std::vector<std::string> TempDir::names() const {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(path)) out.push_back(e.path().filename().string());
  return out;
}

// ---- Missing dependencies ----------------------------------------------------------------------

namespace {
std::atomic<bool> g_skipped{false};
}  // namespace

bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

void skip_missing(const std::string& what, const std::string& reason) {
  if (in_ci()) {
    std::cout << "MISSING (required with CI=true): " << what << ": " << reason << std::endl;
    FAIL_CHECK("MISSING (required with CI=true): " << what << ": " << reason);
    return;
  }
  // One line, flushed before doctest's own output, for the CI summary to grep.
  std::cout << "SKIPPED: " << what << ": " << reason << std::endl;
  g_skipped = true;
}

void skip_not_built(const std::string& what, const std::string& reason) {
  std::cout << "SKIPPED: " << what << ": " << reason << std::endl;
  g_skipped = true;
}

bool skipped() { return g_skipped; }

int exit_code(int rc) { return rc == 0 && g_skipped ? 77 : rc; }

std::string python() { return KILN_TEST_PYTHON; }

std::string shell_quote(const std::string& text) {
  std::string q = "'";
  for (char c : text) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

bool need_python(const std::string& modules) {
  const std::string py = python();
  if (!std::filesystem::exists(py)) {
    skip_missing("python venv", py + " not found (tools/install-deps.sh --test makes it; KILN_VENV moves it)");
    return false;
  }
  const std::string cmd = shell_quote(py) + " -c " + shell_quote("import " + modules) + " >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    skip_missing("python modules", "'import " + modules + "' fails in " + py +
                                       " (tools/install-deps.sh --test installs them)");
    return false;
  }
  return true;
}

bool need_path(const std::string& path, const std::string& what, const std::string& hint) {
  if (std::filesystem::exists(path)) return true;
  skip_missing(what, path + " not found (" + hint + ")");
  return false;
}

std::string run_capture(const std::string& cmd, int* rc) {
  std::string out;
  std::FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) {
    *rc = -1;
    return out;
  }
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = ::pclose(p);
  *rc = status == -1 ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return out;
}

// The emulator's command line, each word shell-quoted, with a trailing space (tests/CMakeLists.txt);
// empty in a native build and in the executables that compile this file without it.
#ifndef KILN_TEST_EMULATOR_SH
#define KILN_TEST_EMULATOR_SH ""
#endif

std::string self_command() {
  // Under qemu-user, reading the link /proc/self/exe gives the emulated program, not qemu.
  return std::string(KILN_TEST_EMULATOR_SH) + shell_quote(std::filesystem::read_symlink("/proc/self/exe").string());
}

// ---- Comparisons -------------------------------------------------------------------------------

bool near(double got, double want, double tol) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::isfinite(got) && std::abs(got - want) <= tol;  // even with an infinite tolerance
}

double abs_diff(double got, double want) {
  if (std::isfinite(got) && std::isfinite(want)) return std::abs(got - want);
  if ((std::isnan(got) && std::isnan(want)) || (std::isinf(want) && got == want)) return 0;
  return INFINITY;
}

int64_t first_mismatch(const std::vector<double>& got, const std::vector<double>& want, double rtol, double atol) {
  const size_t n = std::min(got.size(), want.size());
  for (size_t i = 0; i < n; ++i)
    if (!near(got[i], want[i], atol + rtol * std::abs(want[i]))) return int64_t(i);
  return got.size() == want.size() ? -1 : int64_t(n);
}

double max_abs_diff(const std::vector<double>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, abs_diff(got[i], want[i]));
  return worst;
}

double max_rel_diff(const std::vector<double>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = abs_diff(got[i], want[i]);
    worst = std::max(worst, std::isfinite(want[i]) ? d / (1 + std::abs(want[i])) : d);
  }
  return worst;
}

Tensor make_input(const Shape& shape, uint64_t seed, DType dtype, double lo, double hi) {
  Generator g(seed);
  Tensor t = empty(shape, TensorOptions(DType::float64));
  uniform_(t, lo, hi, &g);
  return t.to(dtype);
}

Tensor distinct_input(const Shape& shape, uint32_t seed) {
  const int64_t n = shape_numel(shape);
  std::vector<double> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0.0);
  std::shuffle(v.begin(), v.end(), std::mt19937(seed));
  for (double& e : v) e = (e - double(n) / 2) * (2.0 / double(n));
  return from_vector(v, shape, DType::float64);
}

Tensor non_contiguous(const Tensor& t) {
  NoGradGuard ng;
  if (t.dim() >= 2) {
    // Store transposed (last two dims swapped), then view back: same values, swapped strides.
    Tensor tt = t.transpose(-1, -2).contiguous();
    Tensor r = tt.transpose(-1, -2);
    if (!r.is_contiguous()) return r;
  }
  // 1-d (or degenerate): take every other element of a twice-as-long buffer.
  Shape big = t.sizes();
  if (big.empty()) return t.clone();
  big.back() *= 2;
  Tensor buf = zeros(big, TensorOptions(t.dtype()));
  Tensor v = buf.slice(-1, 0, big.back(), 2);
  v.copy_(t);
  return v;
}

std::string compare(const Tensor& actual, const Tensor& expected, double rtol, double atol) {
  if (!actual.defined() || !expected.defined())
    return actual.defined() == expected.defined() ? "" : "one tensor is undefined";
  if (actual.sizes() != expected.sizes())
    return "shape " + shape_str(actual.sizes()) + " != expected " + shape_str(expected.sizes());
  std::vector<double> a = actual.to_vector(), e = expected.to_vector();
  double worst = 0;
  int64_t worst_i = -1;
  int64_t bad = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double tol = atol + rtol * std::abs(e[i]);
    if (!near(a[i], e[i], tol)) {  // a NaN or infinity where the reference is finite counts
      ++bad;
      const double err = abs_diff(a[i], e[i]);
      const double excess = std::isfinite(err) ? err / tol : INFINITY;
      if (worst_i < 0 || excess > worst) {
        worst = excess;
        worst_i = int64_t(i);
      }
    }
  }
  if (bad == 0) return "";
  std::ostringstream os;
  os.precision(10);
  os << bad << " of " << a.size() << " elements differ (shape " << shape_str(actual.sizes()) << "); worst at flat index "
     << worst_i << ": got " << a[size_t(worst_i)] << ", expected " << e[size_t(worst_i)] << " (rtol " << rtol
     << ", atol " << atol << ")";
  return os.str();
}

static Tensor weighted_sum(const Tensor& y, const Tensor& w) { return ops::sum(ops::mul(y, w)); }

// The library's own checker (engine/gradcheck.h), strictly on opt.backend.
std::string gradcheck(const Fn& f, const std::vector<Tensor>& inputs0, GradcheckOptions opt) {
  autograd::GradcheckOptions o;
  o.eps = opt.eps;
  o.rtol = opt.rtol;
  o.atol = opt.atol;
  o.seed = opt.seed;
  o.backend = opt.backend;
  return autograd::gradcheck(f, inputs0, o);
}

std::string against_ref(const Fn& f, const std::vector<Tensor>& inputs0, RefCompareOptions opt) {
  auto run = [&](const std::string& backend, DType dt, std::vector<Tensor>& ins, Tensor& w) {
    BackendGuard g(backend, /*strict=*/true);
    ins.clear();
    for (const Tensor& t : inputs0) {
      if (!t.defined() || !t.is_floating_point()) { ins.push_back(t); continue; }
      Tensor c = t.detach().to(dt);
      if (c.is_same(t) || c.impl()->storage == t.impl()->storage) c = c.clone();
      // Keep the caller's layout (non-contiguous inputs stay non-contiguous).
      if (!t.is_contiguous()) c = non_contiguous(c);
      c.requires_grad_(t.requires_grad() && opt.grads);
      ins.push_back(c);
    }
    Tensor y = f(ins);
    if (opt.grads && y.requires_grad()) {
      if (!w.defined()) w = make_input(y.sizes(), opt.seed, DType::float64, 0.5, 1.5);
      weighted_sum(y, w.to(y.dtype())).backward();
    }
    return y;
  };
  std::vector<Tensor> ref_in, tst_in;
  Tensor w;
  Tensor yr = run("ref", DType::float64, ref_in, w);
  Tensor yt = run(opt.backend, opt.dtype, tst_in, w);
  std::string m = compare(yt, yr, opt.rtol, opt.atol);
  if (!m.empty()) return "output (" + opt.backend + " vs ref): " + m;
  if (!opt.grads) return "";
  for (size_t k = 0; k < ref_in.size(); ++k) {
    if (!ref_in[k].defined() || !ref_in[k].requires_grad()) continue;
    m = compare(tst_in[k].grad(), ref_in[k].grad(), opt.rtol, opt.atol);
    if (!m.empty()) return "gradient of input " + std::to_string(k) + " (" + opt.backend + " vs ref): " + m;
  }
  return "";
}

}  // namespace kiln::test
