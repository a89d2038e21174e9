// The `kiln` command-line tool: its subcommands, each defined in the file named beside it.
//   kiln bench --model alexnet,vgg11 --batch 16,64 --mode forward,train   (bench.cpp)
//   kiln plot results.json -o chart                                       (plot.cpp)
//   kiln compare a.json b.json                                            (compare.cpp)
//   kiln info                                                             (info.cpp)
//   kiln data list | fetch NAME [--from URL|PATH] | verify NAME           (data.cpp)
//   kiln scale --compare horovod-p100                                     (scale.cpp)
//   kiln train --model mnist-cnn --data fashion-mnist --epochs 2          (train.cpp)
//   kiln eval --checkpoint runs/fmnist/ckpt-00000938                      (train.cpp)
//   kiln export --model resnet50 --onnx resnet50.onnx                     (export.cpp)
//   kiln timeline merge run.json --out merged.json                        (timeline.cpp)
// Exit codes: 0 success, 1 a kiln::Error (message on stderr), 2 bad command line.
// Test: ctest --test-dir build -R cli
#include <cstdio>
#include <new>
#include <string>

#include "dist/comm.h"
#include "dist/timeline.h"
#include "engine/backend_preference.h"
#include "engine/error.h"
#include "tools/kiln/commands.h"

namespace {

// After an error in a job of several ranks the others may be blocked in a collective (or a rank
// may be stopped): MPI_Abort has the launcher end them all. The timeline so far is written first.
int fail(const char* message) {
  std::fprintf(stderr, "kiln: error: %s\n", message);
  kiln::dist::timeline::stop();
  if (kiln::dist::mpi_initialized() && kiln::dist::world_from_env().size > 1) kiln::dist::abort(1);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kiln: a deep-learning engine for HPC centres"};
  app.require_subcommand(1);
  const std::vector<kiln::cli::Command> commands = kiln::cli::add_all_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  std::string command = "kiln";
  try {
    (void)kiln::backend_preference();  // KILN_BACKEND and KILN_BACKEND_STRICT checked before any output
    for (const auto& c : commands)
      if (c.app->parsed()) {
        command = "kiln " + c.app->get_name();
        return c.run();
      }
  } catch (const kiln::Error& e) {
    return fail(e.message().empty() ? e.what() : e.message().c_str());
  } catch (const std::bad_alloc&) {
    return fail((command + ": out of memory (a size in the input or on the command line is too large?)").c_str());
  } catch (const std::exception& e) {
    // Bad input should arrive as a kiln::Error naming the file or flag; a bare library message
    // ("stoull", "vector::_M_range_check") here is a bug to report, so say where it came from.
    return fail((command + ": unexpected error (please report it): " + e.what()).c_str());
  }
  return 0;
}
