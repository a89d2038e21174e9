// `kiln compare a.json b.json`: images/s of the runs present in both result files and the ratio
// b/a, with the geometric mean of the ratios.
// Matching rule: rows pair on (model, batch, mode, device, backend). When no row pairs that way
// (the files time different backends, frameworks or devices: kiln native vs PyTorch, two
// machines' cpu vs cuda) or with --loose, rows pair on (model, batch, mode) alone, and each file
// must then hold one run per such key. Rows found in only one file are left out.
//   kiln compare before.json after.json
//   kiln compare kiln.json pytorch.json     # any two files of kiln bench --out or pytorch_bench.py --out
#include <cstdio>

#include "bench/harness/results.h"
#include "tools/kiln/commands.h"

namespace kiln::cli {

Command add_compare(CLI::App& app) {
  struct Options {
    std::string a, b;
    bool loose = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("compare", "images/s of two result files side by side, with the ratio b/a");
  sub->add_option("a", o->a, "result file (JSON)")->required();
  sub->add_option("b", o->b, "result file (JSON)")->required();
  sub->add_flag("--loose", o->loose, "match rows on model, batch and mode only (ignore device and backend)");
  return Command{sub, [o] {
                   const bench::Results a = bench::read_results(o->a), b = bench::read_results(o->b);
                   const bench::Comparison c = bench::compare(a, b, o->loose);
                   std::printf("%s", bench::comparison_table(c, o->a, o->b).c_str());
                   return 0;
                 }};
}

}  // namespace kiln::cli
