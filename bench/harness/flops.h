// Counts the multiply-accumulates of a net's conv and linear layers (nets.md's convention:
// pooling, activations, norms and adds are ignored) by running one forward pass on a single
// sample and reading the shapes off the autograd graph: a Conv2d node makes numel(out) x
// (Cin/groups x kh x kw) MACs, a transposed conv numel(in) x (Cout/groups x kh x kw), a Linear
// numel(out) x in_features. Costs one batch-1 forward of the net.
//
// The same pass counts what each layer's ops read and write (for the roofline, roofline.h): the
// elements of every input and output of every autograd node the layer made, split into
// activations (scale with the batch) and parameters (do not). The probe input requires grad so
// that even the first layer's input is on the graph. Views (view, permute, expand, slice)
// move nothing; an op that records no node in eval mode (dropout) counts nothing, in train runs
// too.
//   ctest --test-dir build -R bench.test_bench_output
#pragma once

#include <map>
#include <string>

#include "layers/module.h"

namespace kiln::bench {

struct MacCount {
  double total = 0;                         // per sample
  std::map<std::string, double> by_layer;  // per sample, keyed by layer path (profiler row name)
  // Elements read + written by each layer's ops in one forward: activations per sample,
  // parameters per forward (independent of the batch). Keyed like by_layer.
  std::map<std::string, double> act_elems_by_layer;
  std::map<std::string, double> param_elems_by_layer;
};

// Runs net (eval mode, restored afterwards) on zeros of shape [1, sample...] with the profiler on
// so that nodes carry their layer; resets the profiler before and after. Parameters that do not
// require grad leave their layer uncounted.
MacCount count_macs(Module& net, const Shape& sample);

}  // namespace kiln::bench
