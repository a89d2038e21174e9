// The oracle harness (tests/oracle/oracle.h): buffers, conversions, comparison, the report per
// op, and one test case per op of engine/op_list.inc (an X-macro: an op added there without a
// Case in a problems_<family>.cpp file fails with "op X has no problems").
#include "tests/oracle/oracle.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <new>
#include <set>
#include <sstream>

#include "engine/cuda_runtime.h"
#include "engine/tensor.h"
#include "tests/support/testing.h"

namespace kiln::oracle {

Gen uniform(double lo, double hi) {
  return [lo, hi](Values& v, Rng& r, const std::vector<Values>&) {
    for (double& x : v) x = r.uniform(lo, hi);
  };
}

Gen integers(int64_t lo, int64_t hi) {
  return [lo, hi](Values& v, Rng& r, const std::vector<Values>&) {
    for (double& x : v) x = double(r.integer(lo, hi));
  };
}

Arg in(std::string name, DType t, int64_t n, Gen g) {
  Arg a;
  a.name = std::move(name);
  a.dtype = t;
  a.n = n;
  a.gen = std::move(g);
  return a;
}
Arg out(std::string name, DType t, int64_t n) {
  Arg a = in(std::move(name), t, n);
  a.role = Role::out;
  return a;
}
Arg inout(std::string name, DType t, int64_t n, Gen g) {
  Arg a = in(std::move(name), t, n, std::move(g));
  a.role = Role::inout;
  return a;
}
Arg none(std::string name) {
  Arg a;
  a.name = std::move(name);
  a.null = true;
  return a;
}

namespace detail {

namespace {

template <class T>
T from_double(double x) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
    return T(float(x));
  else
    return static_cast<T>(x);
}

std::vector<unsigned char> to_bytes(const Values& v, DType t) {
  std::vector<unsigned char> b(v.size() * element_size(t));
  visit_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    T* p = reinterpret_cast<T*>(b.data());
    for (size_t i = 0; i < v.size(); ++i) p[i] = from_double<T>(v[i]);
  });
  return b;
}

Values from_bytes(const unsigned char* b, DType t, int64_t n) {
  Values v(static_cast<size_t>(n));
  visit_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    const T* p = reinterpret_cast<const T*>(b);
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
        v[size_t(i)] = double(float(p[i]));
      else
        v[size_t(i)] = double(p[i]);
    }
  });
  return v;
}

}  // namespace

Values round_through(const Values& v, DType t) {
  const std::vector<unsigned char> b = to_bytes(v, t);
  return from_bytes(b.data(), t, int64_t(v.size()));
}

Buffer upload(const Values& v, DType t, DeviceType dev) {
  const std::vector<unsigned char> bytes = to_bytes(v, t);
  Buffer b;
  if (dev == DeviceType::cpu) {
    // Exactly the bytes asked for (64-byte aligned, as kiln's allocator gives): under the
    // sanitize preset AddressSanitizer then sees a kernel touching one element past a buffer.
    const size_t size = std::max<size_t>(1, bytes.size());
    void* p = ::operator new(size, std::align_val_t(64));
    std::memset(p, 0, size);
    if (!bytes.empty()) std::memcpy(p, bytes.data(), bytes.size());
    b.keep = std::shared_ptr<void>(p, [](void* q) { ::operator delete(q, std::align_val_t(64)); });
    b.ptr = p;
    return b;
  }
  const size_t size = std::max<size_t>(64, (bytes.size() + 63) / 64 * 64);
  Tensor host = empty({int64_t(size)}, TensorOptions(DType::uint8));
  std::memset(host.data_ptr(), 0, size);
  if (!bytes.empty()) std::memcpy(host.data_ptr(), bytes.data(), bytes.size());
  auto dev_copy = std::make_shared<Tensor>(host.to(Device(DeviceType::cuda, 0)));
  b.ptr = dev_copy->data_ptr();
  b.keep = dev_copy;
  return b;
}

Values download(const Buffer& b, DType t, int64_t n, DeviceType dev) {
  if (dev == DeviceType::cpu) return from_bytes(static_cast<const unsigned char*>(b.ptr), t, n);
  const Tensor host = std::static_pointer_cast<Tensor>(b.keep)->to(Device());
  return from_bytes(static_cast<const unsigned char*>(host.data_ptr()), t, n);
}

void sync(DeviceType dev) {
  if (dev == DeviceType::cuda) cuda::synchronize();
}

bool device_present(DeviceType dev, std::string* why) {
  if (dev == DeviceType::cpu) return true;
  if (cuda::is_available()) return true;
  *why = cuda::built_with_cuda() ? "no CUDA device: " + cuda::no_device_reason() : "kiln was built without CUDA";
  return false;
}

Values draw(const Arg& a, uint64_t seed, const std::vector<Values>& before) {
  Values v(size_t(a.null ? 0 : a.n), 0.0);
  if (a.null || a.role == Role::out) return v;
  Rng rng(seed);
  if (a.gen)
    a.gen(v, rng, before);
  else
    for (double& x : v) x = rng.uniform(-1, 1);
  return v;
}

std::string compare(const Values& got, const Values& want, DType t, const Tolerance& tol) {
  std::ostringstream os;
  os.precision(9);
  if (got.size() != want.size()) {
    os << got.size() << " elements, the oracle has " << want.size();
    return os.str();
  }
  const bool exact = !is_floating(t);
  double worst = 0;
  int64_t at = -1, bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    // A NaN anywhere fails, in the oracle too (the problem then has no defined answer).
    const bool nan = std::isnan(g) || std::isnan(w);
    const double err = nan ? INFINITY : std::abs(g - w);
    const double allowed = exact ? 0 : tol.atol + tol.rtol * std::abs(w);
    if (nan || !(err <= allowed) || (std::isinf(w) != std::isinf(g))) {
      ++bad;
      const double excess = allowed > 0 ? err / allowed : err;
      if (at < 0 || excess > worst) worst = excess, at = int64_t(i);
    }
  }
  if (bad == 0) return "";
  os << bad << " of " << got.size() << " elements off; worst at [" << at << "]: " << got[size_t(at)] << " vs oracle "
     << want[size_t(at)] << " (rtol " << tol.rtol << ", atol " << tol.atol << ": " << tol.why << ")";
  return os.str();
}

namespace {
// KILN_ORACLE_MEASURE's worst errors, written at exit.
struct Measured {
  std::string path;
  std::map<std::string, std::pair<double, int64_t>> worst;  // "op\tdtype\tbackend" -> (t, elements)
  ~Measured() {
    if (path.empty()) return;
    std::ofstream out(path);
    for (const auto& [key, v] : worst) out << key << '\t' << v.first << '\t' << v.second << '\n';
  }
};
Measured& measured() {
  static Measured m = [] {
    Measured x;
    if (const char* p = std::getenv("KILN_ORACLE_MEASURE")) x.path = p;
    return x;
  }();
  return m;
}
}  // namespace

void measure(const std::string& op, DType row_dtype, DType out_dtype, const std::string& backend, const Values& got,
             const Values& want) {
  Measured& m = measured();
  if (m.path.empty() || !is_floating(out_dtype) || got.size() != want.size()) return;
  auto& [worst, n] = m.worst[op + "\t" + dtype_name(row_dtype) + "\t" + backend];
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = std::isnan(got[i]) != std::isnan(want[i]) ? INFINITY
                     : std::isnan(got[i])                       ? 0.0
                                                                : std::abs(got[i] - want[i]) / (1 + std::abs(want[i]));
    worst = std::max(worst, std::isnan(e) ? INFINITY : e);
  }
  n += int64_t(got.size());
}

uint64_t seed_offset() {
  static const uint64_t k = [] {
    const char* v = std::getenv("KILN_ORACLE_SEED");
    return v && *v ? uint64_t(std::strtoull(v, nullptr, 10)) * 1000003 : uint64_t(0);
  }();
  return k;
}

void fail(const std::string& msg) { FAIL_CHECK(msg); }

bool verbose() {
  const char* v = std::getenv("KILN_ORACLE_VERBOSE");
  return v && *v && std::string(v) != "0";
}

void finish(const Report& r) {
  for (const auto& [who, row] : r.rows) {
    if (!row.skipped.empty()) {
      // A candidate whose device is absent (CUDA without a GPU): the process is Skipped (77) unless
      // something failed, never Passed for what it did not run. Said once per process.
      static bool said = false;
      if (!row.quiet && !said) {
        said = true;
        test::skip_not_built("oracle " + r.op + " " + who, row.skipped);
      }
      continue;
    }
    if (row.reached == 0)
      fail("op " + r.op + ": candidate " + who + " takes none of its " + std::to_string(r.problems) +
           " problems (add one its supports() takes to tests/oracle/problems_*.cpp)");
    if (verbose()) MESSAGE("oracle " << r.op << " " << who << ": " << row.reached << " of " << r.problems << " problems");
  }
}

}  // namespace detail

#ifdef KILN_CUDA_EMU
std::string out_of_scope(const std::string& backend, DeviceType) {
  return backend == "emu" ? "" : "the emulator build checks only backend emu (the others: ctest -R '^oracle$')";
}
#else
std::string out_of_scope(const std::string&, DeviceType dev) {
  static const std::string devices = [] {
    const char* v = std::getenv("KILN_ORACLE_DEVICES");
    return std::string(v && *v ? v : "cpu,cuda");
  }();
  const std::string name = device_type_name(dev);
  std::string list = "," + devices + ",";
  if (list.find("," + name + ",") != std::string::npos) return "";
  return "KILN_ORACLE_DEVICES=" + devices + " leaves out " + name + " (ctest -R '^oracle" +
         (dev == DeviceType::cpu ? std::string("$')") : "_" + name + "$')");
}
#endif

namespace {

const CaseMap& cases() {
  static const CaseMap m = [] {
#ifdef KILN_CUDA_EMU
    add_emu_backend();  // before any case looks at the tables
#endif
    CaseMap c;
    add_elementwise(c);
    add_index(c);
    add_linalg(c);
    add_conv(c);
    add_pool(c);
    add_norm(c);
    add_loss(c);
    add_rnn(c);
    add_optim(c);
    add_shape(c);
    return c;
  }();
  return m;
}

void run_op(const char* name) {
  auto it = cases().find(name);
  if (it == cases().end()) {
    FAIL_CHECK("op " << name << " has no problems (add a Case to tests/oracle/problems_*.cpp)");
    return;
  }
  it->second.run();
}

}  // namespace

TEST_CASE("oracle: every case is an op of engine/op_list.inc") {
  const std::set<std::string> ops = {
#define KILN_KERNEL_OP(id, ...) #id,
#include "engine/op_list.inc"
#undef KILN_KERNEL_OP
  };
  for (const auto& c : cases()) CHECK_MESSAGE(ops.count(c.first), "case " << c.first << " names no op");
}

#define KILN_KERNEL_OP(id, ...) \
  TEST_CASE("oracle " #id) { run_op(#id); }
#include "engine/op_list.inc"
#undef KILN_KERNEL_OP

void* placed_entries(Scratch& s) {
  if (s.device != DeviceType::cuda || s.entries.empty()) return s.entries.data();
  const size_t n = s.entries.size() * sizeof(TensorListEntry);
  Tensor host = empty({int64_t(n)}, TensorOptions(DType::uint8));
  std::memcpy(host.data_ptr(), s.entries.data(), n);
  auto dev_copy = std::make_shared<Tensor>(host.to(Device(DeviceType::cuda, 0)));
  s.keep = dev_copy;
  return dev_copy->data_ptr();
}

}  // namespace kiln::oracle

// ---- helpers of the problem tables (tests/oracle/problems.h) ---------------------------------
#include "tests/oracle/problems.h"

namespace kiln::oracle {

StridedLoop make_loop(std::initializer_list<int64_t> sizes, std::initializer_list<std::initializer_list<int64_t>> strides) {
  KILN_CHECK(sizes.size() <= size_t(kMaxLoopDims) && strides.size() <= size_t(kMaxOperands), "make_loop: too many dims");
  StridedLoop L;
  L.ndim = int(sizes.size());
  L.noperands = int(strides.size());
  int d = 0;
  for (int64_t s : sizes) L.sizes[d++ % kMaxLoopDims] = s;
  int k = 0;
  for (const auto& op : strides) {
    d = 0;
    for (int64_t s : op)
      if (d < kMaxLoopDims) L.strides[k][d++] = s;
    ++k;
  }
  return L;
}

StridedLoop dense_loop(int operands, int64_t n) {
  StridedLoop L;
  L.ndim = 1;
  L.noperands = operands;
  L.sizes[0] = n;
  for (int k = 0; k < operands; ++k) L.strides[k][0] = 1;
  return L;
}

int64_t extent(const StridedLoop& L, int k) {
  int64_t e = 1;
  for (int d = 0; d < L.ndim; ++d) e += (L.sizes[d] - 1) * L.strides[k][d];
  return e;
}

std::string strides_note(const StridedLoop& L) {
  if (L.contiguous()) return "";
  std::string s = "strides ";
  for (int k = 0; k < L.noperands; ++k) {
    if (k) s += "|";
    for (int d = 0; d < L.ndim; ++d) s += (d ? "," : "") + std::to_string(L.strides[k][d]);
  }
  return s;
}

}  // namespace kiln::oracle
