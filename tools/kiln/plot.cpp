// `kiln plot results.json [more.json ...] [-o chart]`: images/s against batch size, one line per
// (model, backend, mode), written as chart.png and chart.svg by gnuplot. Several files (kiln's
// and the PyTorch baseline's, two machines) go into one chart; a (model, backend, mode) found in
// more than one file gets one line per file, labelled with the file name.
#include <cstdio>

#include "bench/harness/plot.h"
#include "tools/kiln/commands.h"
#include "tools/kiln/flag_checks.h"

namespace kiln::cli {

Command add_plot(CLI::App& app) {
  struct Options {
    std::vector<std::string> files;
    std::string out, title;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("plot", "chart images/s against batch size from result files (PNG and SVG)");
  sub->add_option("files", o->files, "result files (JSON) of kiln bench --out or pytorch_bench.py --out")->required();
  sub->add_option("-o,--output", o->out, "output name without extension (default: the first file's, minus .json)");
  sub->add_option("--title", o->title, "chart title");
  return Command{sub, [o] {
                   std::vector<bench::NamedResults> inputs;
                   for (const std::string& f : o->files) inputs.emplace_back(f, bench::read_results(f));
                   std::string stem = o->out;
                   if (stem.empty()) {
                     stem = o->files.front();
                     if (stem.size() > 5 && stem.compare(stem.size() - 5, 5, ".json") == 0) stem.resize(stem.size() - 5);
                   }
                   check_output_path(stem + ".png", "-o");
                   for (const std::string& path : bench::plot_results(inputs, stem, o->title))
                     std::printf("wrote %s\n", path.c_str());
                   return 0;
                 }};
}

}  // namespace kiln::cli
