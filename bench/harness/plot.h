// `kiln plot`: images/s against batch size, one line per (model, backend, mode), from one or
// more result files (kiln's and the PyTorch baseline's), drawn by gnuplot into a PNG and an SVG.
// gnuplot is driven through a temporary script (no C++ plotting library is packaged for Debian
// that would beat it); a missing gnuplot is a kiln::Error saying what to install.
//   ctest --test-dir build -R bench.test_bench_output
//   build/tools/kiln plot results.json -o chart      # chart.png, chart.svg
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "bench/harness/results.h"

namespace kiln::bench {

using NamedResults = std::pair<std::string, Results>;  // (file name, contents)

// The gnuplot executable: $KILN_GNUPLOT, else `gnuplot` on PATH; "" when there is none.
std::string find_gnuplot();

// The gnuplot script that writes `png` and `svg` (exposed for tests).
std::string gnuplot_script(const std::vector<NamedResults>& inputs, const std::string& png, const std::string& svg,
                           const std::string& title);

// Writes <out_stem>.png and <out_stem>.svg; returns their paths. A trailing .png or .svg on
// out_stem is dropped. Throws kiln::Error when gnuplot is missing or fails (with its message).
std::vector<std::string> plot_results(const std::vector<NamedResults>& inputs, std::string out_stem,
                                      const std::string& title = "");

}  // namespace kiln::bench
