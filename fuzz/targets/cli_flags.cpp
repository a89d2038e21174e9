// The `kiln` command line: the App built as tools/kiln/main.cpp builds it (add_all_commands: every subcommand, flag
// and validator, tools/kiln/flag_checks.h), parsed from argv split at NUL bytes; no command runs.
// A CLI::ParseError (a bad command line: exit 2) or a kiln::Error is the expected end of a bad one.
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "engine/error.h"
#include "fuzz/fuzz_target.h"
#include "tools/kiln/commands.h"

KILN_FUZZ_TARGET(cli_flags) {
  std::vector<std::string> args{"kiln"};
  std::string cur;
  for (size_t i = 0; i < size && args.size() < 64; ++i) {
    if (data[i] == 0) {
      args.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(char(data[i]));
    }
  }
  if (!cur.empty()) args.push_back(cur);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  try {
    CLI::App app{"kiln"};
    app.require_subcommand(1);
    const std::vector<kiln::cli::Command> commands = kiln::cli::add_all_commands(app);
    app.parse(int(argv.size()), argv.data());
  } catch (const CLI::ParseError&) {
  } catch (const kiln::Error&) {
  }
  return 0;
}
