// `kiln plot`: images/s against batch size, one line per (model, backend, mode), from one or
// more result files (kiln's and the PyTorch baseline's), drawn by gnuplot into a PNG and an SVG.
// gnuplot is driven through a temporary script (no C++ plotting library is packaged for Debian
// that would beat it); a missing gnuplot is a kiln::Error saying what to install. No string from
// a result file or the command line is written into the script: labels go into the data files
// (a column header gnuplot reads as a key title), the title and the paths come as `gnuplot -c`
// arguments, and gnuplot runs without a shell. A result file cannot make it run a command.
//   ctest --test-dir build -R bench.test_bench_output
//   build/tools/kiln plot results.json -o chart      # chart.png, chart.svg
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "bench/harness/results.h"

namespace kiln::bench {

using NamedResults = std::pair<std::string, Results>;  // (file name, contents)

// The gnuplot executable: $KILN_GNUPLOT (a kiln::Error when it is not an executable file), else
// `gnuplot` on PATH; "" when there is none.
std::string find_gnuplot();

// What gnuplot reads (exposed for tests): the script, run as
//   gnuplot -c plot.gp TITLE DATA_DIR PNG SVG
// and one tab-separated data file per line of the chart, data_file_name(i) in DATA_DIR: a header
// "batch<TAB>label" (the key title; '"' in it becomes "'", a backslash is doubled, control
// characters become spaces), then "batch<TAB>images/s" rows.
struct GnuplotFiles {
  std::string script;
  std::vector<std::string> data;
};
GnuplotFiles gnuplot_files(const std::vector<NamedResults>& inputs);
std::string data_file_name(size_t i);

// Writes <out_stem>.png and <out_stem>.svg; returns their paths. A trailing .png or .svg on
// out_stem is dropped. Throws kiln::Error when gnuplot is missing or fails (with its message).
std::vector<std::string> plot_results(const std::vector<NamedResults>& inputs, std::string out_stem,
                                      const std::string& title = "");

}  // namespace kiln::bench
