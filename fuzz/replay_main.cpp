// kiln_fuzz_replay TARGET PATH...: feeds every file (directories: every file inside, sorted) to the
// fuzz target TARGET exactly as libFuzzer would, built with the normal compiler. Each input must
// return or throw kiln::Error; any other exception fails the run naming the file. CTest runs it
// over fuzz/corpus/<target> and fuzz/regressions/<target> (tests fuzz.<target>, label io).
#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "engine/error.h"
#include "fuzz/fuzz_target.h"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s TARGET FILE_OR_DIR...\n", argv[0]);
    return 2;
  }
  kiln::fuzz::TargetFn fn = kiln::fuzz::find_target(argv[1]);
  if (!fn) {
    std::fprintf(stderr, "kiln_fuzz_replay: no target '%s'\n", argv[1]);
    return 2;
  }
  std::vector<std::string> files;
  for (int i = 2; i < argc; ++i) {
    std::error_code ec;
    if (fs::is_directory(argv[i], ec)) {
      for (const auto& e : fs::directory_iterator(argv[i]))
        if (e.is_regular_file()) files.push_back(e.path().string());
    } else if (fs::exists(argv[i], ec)) {
      files.push_back(argv[i]);
    }
  }
  std::sort(files.begin(), files.end());
  int failures = 0;
  for (const std::string& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::vector<uint8_t> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    try {
      fn(data.data(), data.size());
    } catch (const kiln::Error& e) {
      // The target catches its own; one escaping is still the expected kind of failure.
    } catch (const std::exception& e) {
      std::fprintf(stderr, "FAIL %s: %s: not a kiln::Error: %s\n", argv[1], f.c_str(), e.what());
      ++failures;
    } catch (...) {
      std::fprintf(stderr, "FAIL %s: %s: unknown exception\n", argv[1], f.c_str());
      ++failures;
    }
  }
  std::printf("%s: %zu inputs, %d failures\n", argv[1], files.size(), failures);
  if (files.empty()) {
    std::fprintf(stderr, "kiln_fuzz_replay: no inputs for %s\n", argv[1]);
    return 1;
  }
  return failures ? 1 : 0;
}
