// The subcommand list of the `kiln` tool, shared by main() and the CLI flag fuzz target
// (fuzz/targets/cli_flags.cpp), and split_list.
#include "tools/kiln/commands.h"

#include <sstream>

namespace kiln::cli {

std::vector<Command> add_all_commands(CLI::App& app) {
  return {add_bench(app), add_plot(app),  add_compare(app), add_info(app),  add_data(app),
          add_train(app), add_eval(app),  add_scale(app),   add_timeline(app), add_export(app)};
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace kiln::cli
