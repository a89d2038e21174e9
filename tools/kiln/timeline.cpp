// `kiln timeline merge`: the per-rank Chrome traces of a `--timeline` run in one file, a process
// row per rank, every rank on rank 0's clock (dist/timeline.h), for ui.perfetto.dev.
//   kiln timeline merge --out trace.json trace.rank0.json trace.rank1.json
//   kiln timeline merge --out trace.json trace.json      # trace.json: every trace.rank<r>.json
#include <cstdio>
#include <filesystem>

#include "dist/timeline.h"
#include "engine/error.h"
#include "tools/kiln/commands.h"

namespace kiln::cli {

namespace {

// The files of `inputs`: a --timeline path that a multi-rank run expanded (trace.json ->
// trace.rank0.json, trace.rank1.json ...) stands for all of them.
std::vector<std::string> expand(const std::vector<std::string>& inputs) {
  std::vector<std::string> out;
  for (const std::string& in : inputs) {
    std::error_code ec;
    if (std::filesystem::exists(in, ec) || !std::filesystem::exists(dist::timeline::rank_path(in, 0, 2), ec)) {
      out.push_back(in);
      continue;
    }
    for (int r = 0; std::filesystem::exists(dist::timeline::rank_path(in, r, 2), ec); ++r)
      out.push_back(dist::timeline::rank_path(in, r, 2));
  }
  return out;
}

}  // namespace

Command add_timeline(CLI::App& app) {
  struct Options {
    std::vector<std::string> inputs;
    std::string out;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("timeline", "Chrome-trace timelines of distributed runs");
  sub->require_subcommand(1);
  CLI::App* merge = sub->add_subcommand("merge", "one trace of every rank's, a process row per rank, on rank 0's clock");
  merge->add_option("inputs", o->inputs, "per-rank traces, or the --timeline path a run was given")->required();
  merge->add_option("--out", o->out, "the merged trace (JSON)")->required();
  return Command{sub, [o] {
                   const std::vector<std::string> files = expand(o->inputs);
                   const int64_t n = dist::timeline::merge(files, o->out);
                   std::printf("%s: %lld events of %zu rank(s)\n", o->out.c_str(), (long long)n, files.size());
                   return 0;
                 }};
}

}  // namespace kiln::cli
