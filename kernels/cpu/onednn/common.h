// kiln's oneDNN backend ("onednn"), the light public part: counters that say what the backend
// did (tests check that a kernel really ran on oneDNN and that primitives are cached; the bench
// reads the reorder time). The kernels themselves are declared per op family in conv.h, gemm.h,
// matmul.h, linear.h (inner product), concat.h (concat and sum), pool.h, norm.h and
// elementwise.h next to this file, with the same signatures as the native kernels of
// kernels/cpu/native/. Only built when CMake found oneDNN (KILN_HAVE_ONEDNN).
//
// Primitives are created once per (kind, descriptor str(), thread count) and kept in a
// process-wide, thread-safe cache; they run on the caller's plain NCHW / row-major buffers, with
// reorders into per-thread scratch buffers where oneDNN picked a blocked layout.
// Environment: KILN_ONEDNN_CONV_LAYOUT=plain keeps convolutions on NCHW/OIHW (no reorders,
// oneDNN's GEMM-based convolutions); the default lets oneDNN choose (format_tag::any).
//   Test: ctest --test-dir build -R test_onednn     Bench: build/bench/bench_backends
#pragma once

#include <cstdint>

namespace kiln::onednn {

struct Stats {
  uint64_t primitives_created = 0;  // cache misses (including reorders)
  uint64_t cache_hits = 0;
  uint64_t executions = 0;          // primitive executions and dnnl_sgemm calls
  uint64_t reorders = 0;            // layout reorders between kiln's plain buffers and oneDNN's
  double reorder_seconds = 0;       // wall time spent in them, all operands
  double weight_reorder_seconds = 0;  // the part spent on weights (and weight gradients)
};
// Process-wide totals since start (or the last clear_cache()).
Stats stats();
// Drops every cached primitive and zeroes the counters (tests; not while kernels run).
void clear_cache();
// "2.6.3" (the library loaded at run time).
const char* version();

}  // namespace kiln::onednn
