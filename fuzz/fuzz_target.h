// One fuzz target per parser (fuzz/targets/<name>.cpp), each written once for two builds:
//  - the sanitize preset (clang, libFuzzer, ASan+UBSan): KILN_FUZZ_TARGET(name) is libFuzzer's
//    LLVMFuzzerTestOneInput and each target is its own executable, build-sanitize/fuzz/fuzz_<name>;
//  - the normal build (KILN_FUZZ_REPLAY): every target is registered under its name in one
//    program, kiln_fuzz_replay, which CTest (label io, tests fuzz.<name>) runs over the target's
//    committed seeds and regression inputs, so every finding stays fixed without clang.
// A target returns normally or lets only kiln::Error out (caught in the body): any other
// exception, crash, leak or sanitizer report is a finding. docs/fuzzing.md; tools/fuzz runs them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln::fuzz {

using TargetFn = int (*)(const uint8_t* data, size_t size);
// Replay build only: adds `fn` to the table kiln_fuzz_replay looks names up in.
bool register_target(const char* name, TargetFn fn);
TargetFn find_target(const std::string& name);

// A private directory for this process (mkdtemp under $TMPDIR, removed at exit), for readers
// that take only a path: the target writes its input there and reads it back as the CLI would.
const std::string& temp_dir();
// Writes the input to temp_dir()/name (replacing it) and returns the path.
std::string write_temp(const std::string& name, const uint8_t* data, size_t size);

}  // namespace kiln::fuzz

#ifdef KILN_FUZZ_REPLAY
#define KILN_FUZZ_TARGET(name)                                                                            \
  static int kiln_fuzz_##name(const uint8_t* data, size_t size);                                         \
  [[maybe_unused]] static const bool kiln_fuzz_registered_##name =                                       \
      ::kiln::fuzz::register_target(#name, kiln_fuzz_##name);                                            \
  static int kiln_fuzz_##name(const uint8_t* data, size_t size)
#else
#define KILN_FUZZ_TARGET(name) extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
#endif
