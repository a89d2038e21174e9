// The subcommands of the `kiln` tool, one file each (bench.cpp, plot.cpp, compare.cpp, info.cpp, data.cpp):
// each adds its CLI11 subcommand and options to the app and returns the function that runs it
// once the command line is parsed. Run functions return the exit code and throw kiln::Error on
// failure (main maps it to exit code 1).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace kiln::cli {

struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

Command add_bench(CLI::App& app);
Command add_plot(CLI::App& app);
Command add_compare(CLI::App& app);
Command add_info(CLI::App& app);
Command add_data(CLI::App& app);
Command add_train(CLI::App& app);
Command add_eval(CLI::App& app);
Command add_scale(CLI::App& app);
Command add_timeline(CLI::App& app);

// --- ONNX export (export.cpp)
Command add_export(CLI::App& app);

// Every subcommand above, in `kiln --help` order (commands.cpp): main() and the flag fuzz target.
std::vector<Command> add_all_commands(CLI::App& app);

// "a,b,,c" -> {"a", "b", "c"}
std::vector<std::string> split_list(const std::string& s);

}  // namespace kiln::cli
