// `kiln info`: version, machine, threads, backend preference, registered kernels and the model
// zoo (input shape, parameters, default bench batch).
#include <cstdio>

#include "bench/harness/convnet.h"
#include "bench/harness/results.h"
#include "engine/dispatch.h"
#include "kernels/common/parallel.h"
#include "nets/zoo.h"
#include "tools/kiln/commands.h"

namespace kiln::cli {

Command add_info(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("info", "version, machine, threads, registered kernels, models");
  return Command{sub, [] {
                   const bench::MachineInfo m = bench::machine_info();
                   std::printf("kiln %s\n", bench::kiln_version());
                   std::printf("host: %s, %s, %d hardware threads\n", m.hostname.c_str(), m.cpu.c_str(), m.cores);
                   std::printf("threads: %d\n", num_threads());
                   std::printf("backend preference: %s\n", backend_preference().c_str());
                   std::printf("ops:\n");
                   for (const OpTableBase* op : registry().ops()) {
                     std::string c;
                     for (auto& s : op->candidates()) c += (c.empty() ? "" : ", ") + s;
                     std::printf("  %-24s %s\n", op->name().c_str(), c.c_str());
                   }
                   std::printf("zoo:\n");
                   for (const auto& n : nets::zoo()) {
                     std::string shape;
                     for (int64_t d : n.input) shape += (shape.empty() ? "" : "x") + std::to_string(d);
                     const std::string about =
                         n.description.size() > 70 ? n.description.substr(0, 67) + "..." : n.description;
                     std::printf("  %-12s %-10s %12lld params  batch %-4lld %s\n", n.name.c_str(), shape.c_str(),
                                 static_cast<long long>(n.parameters),
                                 static_cast<long long>(bench::default_batch(n.name)), about.c_str());
                   }
                   // One line with every name, for scripts (tools/dev greps it).
                   std::printf("models:");
                   for (const auto& n : nets::zoo()) std::printf(" %s", n.name.c_str());
                   std::printf("\n");
                   return 0;
                 }};
}

}  // namespace kiln::cli
