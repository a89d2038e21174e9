// The gate passes of the native recurrent kernels (see rnn_gates.h): the baseline build of the
// loops, the choice of build, and the split of a step over the threads.
//   Test: ctest --test-dir build -R 'oracle$|rnn'
#include "kernels/cpu/native/rnn_gates.h"

#include <algorithm>
#include <atomic>

#include "kernels/common/error.h"
#include "kernels/common/parallel.h"
#include "kernels/cpu/native/cpu_features.h"

namespace kiln::native {

namespace rnn_gates_base {
#include "kernels/cpu/native/rnn_gates_kernels.inc"
}  // namespace rnn_gates_base

namespace {

// Work items are (row, block of columns) pairs. A block of 256 columns is 4 KiB per gate array,
// long enough for the vector loops and short enough that N = 4 rows of H = 1536 make 24 items.
// A chunk holds at least kGrain elements: a step of a few thousand elements costs about what an
// OpenMP fork does, and runs serially.
constexpr int64_t kBlock = 256;
constexpr int64_t kGrain = 4096;

template <class A, class F>
void for_blocks(const A& a, F block) {
  const int64_t jb = std::min(a.H, kBlock), nb = (a.H + jb - 1) / jb;
  parallel_for(0, a.N * nb, std::max<int64_t>(1, kGrain / jb), [&](int64_t b, int64_t e) {
    for (int64_t it = b; it < e; ++it) {
      const int64_t n = it / nb, j0 = it % nb * jb;
      block(a, n, j0, std::min(a.H, j0 + jb));
    }
  });
}

// rnn::apply itself, element by element (the "generic" path).
template <class A>
void generic(const A& a) {
  parallel_for(0, a.N * a.H, kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) rnn::apply(a, i);
  });
}

struct GateKernels {
  const char* name;
  decltype(&rnn_gates_base::step_fwd_block) fwd;  // null: generic
  decltype(&rnn_gates_base::step_bwd_block) bwd;
};
const GateKernels kSets[] = {
    {"avx512", rnn_gates_avx512::step_fwd_block, rnn_gates_avx512::step_bwd_block},
    {"avx2", rnn_gates_avx2::step_fwd_block, rnn_gates_avx2::step_bwd_block},
    {"baseline", rnn_gates_base::step_fwd_block, rnn_gates_base::step_bwd_block},
    {"generic", nullptr, nullptr},
};

bool available(const std::string& name) {
  const bool x86 = build_arch() == CpuArch::x86_64;
  if (name == "avx512") return x86 && has_avx512f();
  if (name == "avx2") return x86 && has_avx2();
  return name == "baseline" || name == "generic";
}

const GateKernels* find_set(const std::string& name) {
  for (const GateKernels& k : kSets)
    if (name == k.name) return &k;
  return nullptr;
}

std::atomic<const GateKernels*> g_set{nullptr};

const GateKernels& kernels() {
  const GateKernels* k = g_set.load(std::memory_order_acquire);
  if (!k) {
    // The first of avx512, avx2, baseline this CPU runs (after KILN_CPU_ISA's cap).
    for (const GateKernels& s : kSets)
      if (available(s.name)) {
        k = &s;
        break;
      }
    g_set.store(k, std::memory_order_release);
  }
  return *k;
}

}  // namespace

void rnn_gates_fwd(const rnn::StepFwd<float>& a) {
  const GateKernels& k = kernels();
  if (k.fwd) for_blocks(a, k.fwd);
  else generic(a);
}

void rnn_gates_bwd(const rnn::StepBwd<float>& a) {
  const GateKernels& k = kernels();
  if (k.bwd) for_blocks(a, k.bwd);
  else generic(a);
}

const char* rnn_gates_path() { return kernels().name; }

void set_rnn_gates_path(const std::string& name) {
  if (name == "auto") {
    g_set.store(nullptr, std::memory_order_release);
    return;
  }
  const GateKernels* k = find_set(name);
  KILN_CHECK(k, "set_rnn_gates_path: unknown path '", name, "' (avx512, avx2, baseline, generic or auto)");
  KILN_CHECK(available(name), "set_rnn_gates_path: ", name, " is not available here (CPU features: ",
             cpu_features_str(), ")");
  g_set.store(k, std::memory_order_release);
}

}  // namespace kiln::native
