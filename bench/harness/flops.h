// Counts the multiply-accumulates of a net's conv and linear layers (nets.md's convention:
// pooling, activations, norms and adds are ignored) by running one forward pass on a single
// sample and reading the shapes off the autograd graph: a Conv2d node makes numel(out) x
// (Cin/groups x kh x kw) MACs, a transposed conv numel(in) x (Cout/groups x kh x kw), a Linear
// numel(out) x in_features. Costs one batch-1 forward of the net.
//   ctest --test-dir build -R bench.test_bench_output
#pragma once

#include <map>
#include <string>

#include "layers/module.h"

namespace kiln::bench {

struct MacCount {
  double total = 0;                         // per sample
  std::map<std::string, double> by_layer;  // per sample, keyed by layer path (profiler row name)
};

// Runs net (eval mode, restored afterwards) on zeros of shape [1, sample...] with the profiler on
// so that nodes carry their layer; resets the profiler before and after. Parameters that do not
// require grad leave their layer uncounted.
MacCount count_macs(Module& net, const Shape& sample);

}  // namespace kiln::bench
