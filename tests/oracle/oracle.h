// The oracle: every registered candidate of every op (engine/op_list.inc) against the `ref` CPU
// kernel in float64, over one table of problems per op, with one tolerance per (op, dtype,
// backend) (tests/oracle/tolerances.cpp). The ideas of ggml's tests/test-backend-ops.cpp and
// oneDNN's benchdnn (problems named by their descriptor's str(), e.g. "mb2ic3ih9oc4kh3ph1").
//
// Per op a family file (tests/oracle/problems_<family>.cpp) gives a Case: the problems (each a
// descriptor in the dtype under test) and how to lay out the kernel's arguments for a descriptor
// (Arg: dtype, elements, input/output, how inputs are drawn). The harness (oracle.cpp) then, per
// problem: draws the inputs once in double from a seed, rounds them through the dtype under test
// (so oracle and candidate read the same numbers), runs the ref candidate on the float64
// descriptor, runs every candidate whose supports() takes the problem on its device (CPU; CUDA
// when a device exists, else a Skipped-style MESSAGE) with a fresh KernelPayload (forward then
// backward with the forward's payload where the kernel takes one), and compares every output:
// a NaN anywhere fails. A candidate that no problem reaches fails, and so does an op without a
// Case ("op X has no problems").
//   ctest --test-dir build -R oracle        (KILN_ORACLE_VERBOSE=1: one line per candidate)
//
// Two executables run the same tables: kiln_tests_oracle (ctest -R '^oracle$') checks every
// registered candidate; kiln_tests_oracle_emu (ctest -R oracle_emu, label emu) is built with the
// emulator (KILN_CUDA_EMU) and checks only backend "emu", kiln's CUDA kernels compiled as C++
// (tests/oracle/emu_backend.cpp), under AddressSanitizer (KILN_EMU_ASAN).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/dispatch.h"

namespace kiln::oracle {

using Values = std::vector<double>;

// Deterministic draws (splitmix64): the same problem gives the same inputs on every run.
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {}
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform(double lo, double hi) { return lo + (hi - lo) * double(next() >> 11) * (1.0 / 9007199254740992.0); }
  int64_t integer(int64_t lo, int64_t hi) { return lo + int64_t(next() % uint64_t(hi - lo + 1)); }  // [lo, hi]
};

enum class Role : uint8_t { in, out, inout };

// How an input's values are drawn: v has the argument's element count; `before` holds the
// values of the arguments before it (already rounded through the dtype under test), so derived
// inputs (indices or saved statistics of the ref forward) can be computed from them.
using Gen = std::function<void(Values& v, Rng& rng, const std::vector<Values>& before)>;
Gen uniform(double lo, double hi);
Gen integers(int64_t lo, int64_t hi);  // uniform integers in [lo, hi]

// One kernel argument (a buffer) of one run.
struct Arg {
  std::string name;
  DType dtype = DType::float32;
  int64_t n = 0;
  Role role = Role::in;
  Gen gen;             // inputs and inout (default: uniform in [-1, 1))
  bool null = false;   // passed as a null pointer (an absent optional argument)
  double fill = 96;    // the initial value of outputs (written elements must all be written)
  bool compare = true; // outputs only: compared with the oracle
};
Arg in(std::string name, DType t, int64_t n, Gen g = nullptr);
Arg out(std::string name, DType t, int64_t n);
Arg inout(std::string name, DType t, int64_t n, Gen g = nullptr);
Arg none(std::string name);  // a null pointer

// Storage the pointer arrays of some kernels live in (concat's srcs, the multi-tensor list), for
// a candidate on `device`.
struct Scratch {
  DeviceType device = DeviceType::cpu;
  std::vector<const void*> ptrs;
  std::vector<TensorListEntry> entries;
  std::shared_ptr<void> keep;  // a device copy of entries
};
// `s.entries` where the kernel reads them: the host vector on the CPU; on CUDA a device copy,
// as the engine passes them (engine/ops/optim.cpp place_entries).
void* placed_entries(Scratch& s);

template <class D>
struct Problem {
  D desc;
  int variant = 0;   // a kernel argument outside the descriptor (multi_tensor_sum_squares' of_grad)
  std::string note;  // appended to desc.str() in messages
};

template <class Op>
struct Case {
  using D = typename Op::Desc;
  std::vector<Problem<D>> problems;
  // The buffers of a run of descriptor d (the dtypes follow d: called once for the problem, once
  // for its float64 oracle).
  std::function<std::vector<Arg>(const D& d, int variant)> args;
  // The kernel's pointer arguments from the buffers' (null: one per buffer, in order).
  std::function<std::vector<void*>(const D& d, int variant, const std::vector<void*>& bufs, Scratch& s)> kernel_args;
  // The descriptor the oracle runs (null: the problem's, with every floating dtype float64).
  std::function<D(const D&)> oracle;
  // Backward kernels that take a payload: runs the same backend's forward on d and fills p
  // (false: that backend has no forward taking d).
  std::function<bool(int backend, DeviceType dev, const D& d, KernelPayload& p)> forward;
};

// The descriptor with its floating dtypes made float64.
template <class D>
D as_float64(D d) {
  if constexpr (std::is_same_v<D, CopyDesc>) {
    if (is_floating(d.src_dtype)) d.src_dtype = DType::float64;
    if (is_floating(d.dst_dtype)) d.dst_dtype = DType::float64;
  } else {
    if (is_floating(d.dtype)) d.dtype = DType::float64;
  }
  return d;
}

// The dtype of the 'side' operands that stay float32 when activations are bfloat16/float16
// (convolution bias, batch-norm statistics), else the data dtype.
inline DType side_dtype(DType t) { return t == DType::bfloat16 || t == DType::float16 ? DType::float32 : t; }

// ---- tolerances (tests/oracle/tolerances.cpp) -----------------------------------------------
struct Tolerance {
  double rtol = 0, atol = 0;
  const char* why = "";
};
// The row for (op, dtype, backend), the most specific one that matches ("*" rows are defaults).
Tolerance tolerance(const std::string& op, DType dtype, const std::string& backend);

// ---- which candidates an executable checks (oracle.cpp) ---------------------------------------
// The emulator build only: registers backend "emu" (tests/oracle/emu_backend.cpp); the harness
// calls it once, before the first case.
void add_emu_backend();
// Whether this executable checks the candidates of `backend` on `dev` ("" when it does, else why
// not): the emulator build checks only backend "emu" and leaves the others to kiln_tests_oracle;
// KILN_ORACLE_DEVICES (a comma list of cpu, cuda; unset: both) narrows kiln_tests_oracle to the
// candidates of those devices, as CTest's `oracle` (cpu) and `oracle_cuda` (cuda, label gpu) run it.
std::string out_of_scope(const std::string& backend, DeviceType dev);

// ---- the harness (oracle.cpp) -----------------------------------------------------------------
// A case with its types erased: what the X-macro over engine/op_list.inc runs per op.
struct OpCheck {
  std::function<void()> run;
};
using CaseMap = std::map<std::string, OpCheck>;

// The family files: each adds the cases of its ops.
void add_elementwise(CaseMap& m);
void add_index(CaseMap& m);
void add_linalg(CaseMap& m);
void add_conv(CaseMap& m);
void add_pool(CaseMap& m);
void add_norm(CaseMap& m);
void add_loss(CaseMap& m);
void add_rnn(CaseMap& m);
void add_optim(CaseMap& m);
void add_shape(CaseMap& m);

namespace detail {

// Device buffers of one run and the dtype conversions between them and doubles.
struct Buffer {
  std::shared_ptr<void> keep;  // what owns the memory
  void* ptr = nullptr;
};
Buffer upload(const Values& v, DType t, DeviceType dev);
Values download(const Buffer& b, DType t, int64_t n, DeviceType dev);
Values round_through(const Values& v, DType t);
void sync(DeviceType dev);
bool device_present(DeviceType dev, std::string* why);

// "" when every element of got is within the tolerance of want, else the worst mismatch.
std::string compare(const Values& got, const Values& want, DType t, const Tolerance& tol);
// Tolerance measurement (tests/oracle/measure_tolerances.sh): with KILN_ORACLE_MEASURE=<file>,
// every floating comparison also records, per (op, dtype, backend) as tolerance() keys its rows
// (the problem's dtype), the worst
// |got - oracle| / (1 + |oracle|) (the t of a tolerance atol = rtol = t), written to <file> as
// TSV when the process ends. KILN_ORACLE_SEED=<k> draws every input from other seeds.
void measure(const std::string& op, DType row_dtype, DType out_dtype, const std::string& backend, const Values& got,
             const Values& want);
uint64_t seed_offset();

struct Report {
  std::string op;
  int problems = 0;
  // per candidate ("backend/device"): problems reached, runs, failures
  struct Row {
    int reached = 0;
    std::string skipped;   // why it could not run here
    bool quiet = false;    // skipped because another executable checks it: no message
  };
  std::vector<std::pair<std::string, Row>> rows;
};
void finish(const Report& r);
void fail(const std::string& msg);
bool verbose();

template <class A>
A arg_cast(void* p) {
  if constexpr (std::is_same_v<A, bool>)
    return p != nullptr;
  else
    return static_cast<A>(p);
}

template <class D, class... A>
struct Invoke;
template <class D, class... A>
struct Invoke<OpTable<D, A...>> {
  template <class C, size_t... I>
  static void call(const C& c, const D& d, KernelPayload& p, void* const* ptrs, std::index_sequence<I...>) {
    if (c.run)
      c.run(d, arg_cast<A>(ptrs[I])...);
    else
      c.run_payload(d, p, arg_cast<A>(ptrs[I])...);
  }
  template <class C>
  static void run(const C& c, const D& d, KernelPayload& p, const std::vector<void*>& ptrs) {
    KILN_CHECK(ptrs.size() == sizeof...(A), "oracle: ", sizeof...(A), " kernel arguments expected, the case gives ",
               ptrs.size());
    call(c, d, p, ptrs.data(), std::index_sequence_for<A...>{});
  }
};

template <class Op>
using Cand = typename Op::Table::Candidate;

template <class Op>
std::string desc_text(const Problem<typename Op::Desc>& p) {
  return p.desc.str() + (p.note.empty() ? "" : " " + p.note);
}

template <class D>
DType problem_dtype(const D& d) {
  if constexpr (std::is_same_v<D, CopyDesc>)
    return d.dst_dtype;
  else
    return d.dtype;
}

// The inputs of a run, drawn once per problem.
Values draw(const Arg& a, uint64_t seed, const std::vector<Values>& before);

// Runs candidate c of Op on d with `vals` on device dev; returns the outputs (per arg, empty
// for inputs). Throws what the kernel throws.
template <class Op>
std::vector<Values> execute(const Case<Op>& cs, const Cand<Op>& c, const typename Op::Desc& d, int variant,
                            const std::vector<Arg>& args, const std::vector<Values>& vals, KernelPayload& payload) {
  const DeviceType dev = c.device;
  std::vector<Buffer> bufs(args.size());
  std::vector<void*> ptrs(args.size(), nullptr);
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].null) continue;
    Values init = vals[i];
    if (args[i].role == Role::out) init.assign(size_t(args[i].n), args[i].fill);
    bufs[i] = upload(round_through(init, args[i].dtype), args[i].dtype, dev);
    ptrs[i] = bufs[i].ptr;
  }
  Scratch scratch;
  scratch.device = dev;
  const std::vector<void*> kargs = cs.kernel_args ? cs.kernel_args(d, variant, ptrs, scratch) : ptrs;
  Invoke<typename Op::Table>::run(c, d, payload, kargs);
  sync(dev);
  std::vector<Values> outs(args.size());
  for (size_t i = 0; i < args.size(); ++i)
    if (!args[i].null && args[i].role != Role::in) outs[i] = download(bufs[i], args[i].dtype, args[i].n, dev);
  return outs;
}

// Forward kernels for the payload path: candidate of backend `backend` on `dev` of op Fwd,
// run on `d` with inputs of fwd_case's layout; fills p. False when that backend has no Fwd
// candidate taking d.
template <class Fwd>
bool run_forward(const Case<Fwd>& fwd_case, int backend, DeviceType dev, const typename Fwd::Desc& d,
                 KernelPayload& p) {
  for (const auto& c : op_table<Fwd>().all()) {
    if (c->backend != backend || c->device != dev || !c->takes(d)) continue;
    const std::vector<Arg> args = fwd_case.args(d, 0);
    std::vector<Values> vals;
    for (const Arg& a : args) vals.push_back(draw(a, 99, vals));
    p.backend = backend;
    execute<Fwd>(fwd_case, *c, d, 0, args, vals, p);
    return true;
  }
  return false;
}

template <class Op>
void check(const Case<Op>& cs) {
  using D = typename Op::Desc;
  Report rep;
  rep.op = Op::name;
  const auto& all = op_table<Op>().all();
  for (const auto& c : all) rep.rows.push_back({backend_name(c->backend) + "/" + device_type_name(c->device), {}});
  for (size_t k = 0; k < all.size(); ++k) {
    std::string why = out_of_scope(backend_name(all[k]->backend), all[k]->device);
    if (!why.empty()) {
      rep.rows[k].second.skipped = why;
      rep.rows[k].second.quiet = true;
    } else if (!device_present(all[k]->device, &why)) {
      rep.rows[k].second.skipped = why;
    }
  }
  // Nothing to check here (every candidate out of scope or on an absent device): no problem is
  // computed, and finish() says why.
  bool any = false;
  for (const auto& row : rep.rows) any = any || row.second.skipped.empty();
  if (!any) return finish(rep);
  if (cs.problems.empty()) fail(std::string("op ") + Op::name + " has no problems");
  const Cand<Op>* ref = nullptr;
  for (const auto& c : all)
    if (backend_name(c->backend) == "ref" && c->device == DeviceType::cpu) ref = c.get();
  if (!ref) return fail(std::string("op ") + Op::name + ": no ref candidate on the CPU (the oracle)");

  uint64_t seed = 1;
  for (const Problem<D>& pb : cs.problems) {
    ++rep.problems;
    ++seed;
    const D& d = pb.desc;
    const std::string text = desc_text<Op>(pb);
    const D od = cs.oracle ? cs.oracle(d) : as_float64(d);
    const std::vector<Arg> targs = cs.args(d, pb.variant), oargs = cs.args(od, pb.variant);
    if (targs.size() != oargs.size()) {
      fail(std::string(Op::name) + ": the case lays out " + text + " and its oracle differently");
      continue;
    }
    // Inputs: drawn in double, rounded through the dtype under test.
    std::vector<Values> vals;
    for (size_t i = 0; i < targs.size(); ++i) {
      Values v = draw(targs[i], seed * 131 + i + seed_offset(), vals);
      vals.push_back(targs[i].role == Role::out ? v : round_through(v, targs[i].dtype));
    }
    if (!ref->takes(od)) {
      fail(std::string(Op::name) + ": the ref candidate does not take the oracle's " + od.str() + " (problem " + text +
           ")");
      continue;
    }
    std::vector<Values> want;
    try {
      KernelPayload none;
      none.backend = ref->backend;
      want = execute<Op>(cs, *ref, od, pb.variant, oargs, vals, none);
    } catch (const std::exception& e) {
      fail(std::string(Op::name) + " ref (oracle) threw on " + od.str() + ": " + e.what());
      continue;
    }
    for (size_t k = 0; k < all.size(); ++k) {
      const Cand<Op>& c = *all[k];
      if (!rep.rows[k].second.skipped.empty()) continue;  // supports() may ask the absent device
      if (!c.takes(d)) continue;
      ++rep.rows[k].second.reached;
      const std::string who = std::string(Op::name) + " " + rep.rows[k].first + " on " + text;
      const Tolerance tol = tolerance(Op::name, problem_dtype(d), backend_name(c.backend));
      // A fresh payload; for a backward kernel that takes one, also the forward's payload.
      std::vector<std::pair<std::string, KernelPayload>> payloads;
      {
        KernelPayload fresh;
        fresh.backend = c.backend;
        payloads.push_back({"", fresh});
      }
      if (c.run_payload && cs.forward) {
        KernelPayload filled;
        if (cs.forward(c.backend, c.device, d, filled)) payloads.push_back({" (forward's payload)", filled});
      }
      for (auto& [label, payload] : payloads) {
        std::vector<Values> got;
        try {
          got = execute<Op>(cs, c, d, pb.variant, targs, vals, payload);
        } catch (const std::exception& e) {
          fail(who + label + ": threw: " + e.what());
          continue;
        }
        for (size_t i = 0; i < targs.size(); ++i) {
          if (targs[i].null || targs[i].role == Role::in || !targs[i].compare) continue;
          // The oracle rounded to the output's dtype: the best any candidate can return.
          const Values rounded = round_through(want[i], targs[i].dtype);
          measure(Op::name, problem_dtype(d), targs[i].dtype, backend_name(c.backend), got[i], rounded);
          const std::string m = compare(got[i], rounded, targs[i].dtype, tol);
          if (!m.empty()) fail(who + label + ": " + targs[i].name + ": " + m);
        }
      }
    }
  }
  finish(rep);
}

}  // namespace detail

// Registers cs as the case of Op.
template <class Op>
void add(CaseMap& m, Case<Op> cs) {
  auto shared = std::make_shared<Case<Op>>(std::move(cs));
  m[Op::name] = OpCheck{[shared] { detail::check<Op>(*shared); }};
}

}  // namespace kiln::oracle
