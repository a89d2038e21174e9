// Benchmark result files: JSON (one object: "machine" and an array "runs" with every field,
// per-iteration times and per-layer rows) and CSV (a header and one row per run). The PyTorch
// baseline (bench/baselines/pytorch_bench.py) writes the same JSON, so `kiln compare` and
// `kiln plot` read both. Also the row matching of `kiln compare`.
//   ctest --test-dir build -R bench.test_bench_output
#pragma once

#include <string>
#include <vector>

#include "bench/harness/convnet.h"
#include "bench/harness/peak.h"

namespace kiln::bench {

struct MachineInfo {
  std::string framework = "kiln";  // "kiln", "pytorch"
  std::string version;             // the framework's version
  std::string hostname;
  std::string cpu;                 // "model name" of /proc/cpuinfo
  int cores = 0;                   // hardware threads the OS reports
  int threads = 0;                 // threads used inside ops
  std::string date;                // ISO 8601, UTC
  MachinePeak peak;                // kiln bench's quick measurement (peak.threads 0: none)
};

struct Results {
  MachineInfo machine;
  std::vector<RunResult> runs;
};

// This machine and process, now.
MachineInfo machine_info();

std::string to_json(const Results& results);  // pretty-printed, 2 spaces
Results results_from_json(const std::string& text, const std::string& origin = "results");
std::string to_csv(const Results& results);
std::string csv_header();

// Writes by extension (.json or .csv); throws naming the path when it cannot.
void write_results(const Results& results, const std::string& path);
// Reads a JSON result file (kiln's or the PyTorch baseline's).
Results read_results(const std::string& path);

// One row of `kiln compare`: the same (model, batch, mode) in both files.
struct CompareRow {
  std::string model, mode, device_a, device_b, backend_a, backend_b;
  int64_t batch = 0;
  double images_per_s_a = 0, images_per_s_b = 0;
  double ratio = 0;  // b / a
};
struct Comparison {
  bool loose = false;  // matched on (model, batch, mode) only
  std::vector<CompareRow> rows;
  double geomean_ratio = 0;  // over rows
};
// Rows match on (model, batch, mode, device, backend). When that pairs no rows at all, as when
// the files come from two backends, frameworks or devices, or when `loose` is asked, rows match
// on (model, batch, mode) alone; each key must then occur once per file (else kiln::Error naming
// it: use --backend filters upstream). Rows only in one file are left out.
Comparison compare(const Results& a, const Results& b, bool loose = false);
std::string comparison_table(const Comparison& c, const std::string& name_a, const std::string& name_b);

}  // namespace kiln::bench
