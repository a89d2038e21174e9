// Range checks for the numeric flags of every `kiln` subcommand. A value outside the range a user
// can mean (a batch of 0 or of 10^12, a momentum of 5, a NaN learning rate) is a CLI11
// validation error: exit code 2 and "--flag: <value> is not ..." on stderr, before anything runs.
// CLI::Range alone lets NaN through (every comparison with it is false) and says nothing of
// infinity, so real-valued flags use real() here.
//   ctest --test-dir build -R cli.bad_args
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace kiln::cli {

// The largest batch any flag takes: 2^20 samples per step.
constexpr int64_t kMaxBatch = int64_t(1) << 20;
// Threads inside ops: more than any machine has.
constexpr int kMaxThreads = 4096;
// Sample, step and epoch counts: far past any run, small enough that sums of them cannot overflow.
constexpr int64_t kMaxCount = int64_t(1) << 40;

// A whole number in [lo, hi].
CLI::Validator whole(int64_t lo, int64_t hi);
// A finite real number in [lo, hi]; lo_open / hi_open make that end exclusive.
CLI::Validator real(double lo, double hi, bool lo_open = false, bool hi_open = false);
// "a,b,c" where each item is a whole number in [lo, hi] (--batch 16,64; --gpus 1,8,64).
CLI::Validator whole_list(int64_t lo, int64_t hi);

// Refuses, naming the flag, an output path whose folder is missing or not writable, or that is
// itself a folder: checked before a run that may take minutes, not after it.
void check_output_path(const std::string& path, const std::string& flag);

// One item of such a list, checked the same way; the error names `flag`.
int64_t parse_whole(const std::string& text, const std::string& flag, int64_t lo, int64_t hi);

}  // namespace kiln::cli
