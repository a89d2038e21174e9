// Result files (JSON through nlohmann-json, CSV by hand: flat rows need no library) and the
// row matching of `kiln compare`; see results.h.
#include "bench/harness/results.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>
#include <tuple>
#include <type_traits>

#include "engine/error.h"
#include "engine/version.h"
#include "io/formats/json_limits.h"
#include "kernels/common/parallel.h"

namespace kiln::bench {
namespace {

using json = nlohmann::ordered_json;

constexpr const char* kFormat = "kiln-bench-results/1";

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  const size_t e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// "model name" on x86, "cpu" on POWER, "Processor"/"CPU part" elsewhere; uname's machine last.
std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, fallback;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = trim(line.substr(0, colon)), value = trim(line.substr(colon + 1));
    if (key == "model name" && !value.empty()) return value;
    if ((key == "cpu" || key == "Processor") && fallback.empty()) fallback = value;
  }
  if (!fallback.empty()) return fallback;
  struct utsname u;
  return uname(&u) == 0 ? u.machine : "unknown";
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

json run_to_json(const RunResult& r) {
  json j = {
      {"model", r.spec.model},
      {"device", r.spec.device},
      {"backend", r.spec.backend},
      {"layout", r.spec.layout},
      {"dtype", r.spec.dtype},
      {"batch", r.spec.batch},
      {"mode", r.spec.train ? "train" : "forward"},
      {"iters", r.spec.iters},
      {"warmup", r.spec.warmup},
      {"threads", r.threads},
      {"loss", r.spec.loss ? "cross_entropy" : "random_grad"},
      {"ms", r.ms},
      {"ms_min", r.ms_min},
      {"ms_median", r.ms_median},
      {"ms_max", r.ms_max},
      {"ms_mean", r.ms_mean},
      {"images_per_s", r.images_per_s},
      {"wall_s", r.wall_s},
      {"peak_bytes", r.peak_bytes},
      {"parameters", r.parameters},
      {"gflop_per_iter", r.gflop_per_iter},
      {"gflops", r.gflops},
  };
  if (r.peak_gflops > 0) {
    j["peak_gflops"] = r.peak_gflops;
    j["of_peak"] = r.of_peak;
    j["bandwidth_gbs"] = r.bandwidth_gbs;
  }
  if (!r.losses.empty()) j["losses"] = r.losses;
  if (r.ranks > 1) {
    j["strategy"] = dist::strategy_name(r.spec.dist.strategy);
    j["ranks"] = r.ranks;
    j["aggregate_images_per_s"] = r.aggregate_images_per_s;
    j["rank_images_per_s"] = r.rank_images_per_s;
    if (r.spec.dist.strategy == dist::StrategyKind::sync) {
      j["comm_wait_ms"] = r.comm_wait_ms;
      j["bucket_mb"] = r.spec.dist.sync.bucket_mb;
      j["overlap"] = r.spec.dist.sync.overlap;
    }
  }
  if (!r.layers.empty()) {
    json rows = json::array();
    for (const LayerRow& l : r.layers)
      rows.push_back({{"name", l.name},
                      {"kind", l.kind},
                      {"forward_ms", l.forward_ms},
                      {"backward_ms", l.backward_ms},
                      {"share", l.share},
                      {"gflop", l.gflop},
                      {"gbytes", l.gbytes},
                      {"gflops", l.gflops},
                      {"of_peak", l.of_peak},
                      {"intensity", l.intensity},
                      {"memory_bound", l.memory_bound},
                      {"bound_ms", l.bound_ms},
                      {"of_bound", l.of_bound}});
    j["layers"] = rows;
  }
  return j;
}

// A value of a result file as T; a wrong type is an error naming the file, the run, the key and
// the value (nlohmann's own type_error names none of them).
template <class T>
T as(const json& v, const std::string& where, const char* key) {
  try {
    return v.get<T>();
  } catch (const json::exception&) {
    std::string shown = v.dump();
    if (shown.size() > 60) shown = shown.substr(0, 57) + "...";
    KILN_THROW(where, ": '", key, "' is ", shown, ", not ",
               std::is_same_v<T, std::string> ? "a string" : std::is_arithmetic_v<T> ? "a number" : "a list of numbers");
  }
}

template <class T>
T field(const json& j, const char* key, const T& fallback, const std::string& where) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? fallback : as<T>(*it, where, key);
}

RunResult run_from_json(const json& j, const std::string& where) {
  KILN_CHECK(j.is_object(), where, ": not an object");
  for (const char* key : {"model", "batch", "mode", "images_per_s"})
    KILN_CHECK(j.contains(key), where, ": no '", key, "'");
  RunResult r;
  r.spec.model = as<std::string>(j["model"], where, "model");
  r.spec.batch = as<int64_t>(j["batch"], where, "batch");
  KILN_CHECK(j["batch"].is_number_integer() && r.spec.batch > 0, where, ": 'batch' is ", j["batch"].dump(),
             ", not a positive integer");
  const std::string mode = as<std::string>(j["mode"], where, "mode");
  KILN_CHECK(mode == "forward" || mode == "train", where, ": mode is '", mode, "', expected forward or train");
  r.spec.train = mode == "train";
  r.spec.device = field<std::string>(j, "device", "cpu", where);
  r.spec.backend = field<std::string>(j, "backend", "auto", where);
  r.spec.layout = field<std::string>(j, "layout", "auto", where);
  r.spec.dtype = field<std::string>(j, "dtype", "float32", where);
  r.spec.iters = field<int>(j, "iters", 0, where);
  r.spec.warmup = field<int>(j, "warmup", 0, where);
  r.spec.loss = field<std::string>(j, "loss", "random_grad", where) == "cross_entropy";
  r.threads = field<int>(j, "threads", 0, where);
  r.ms = field<std::vector<double>>(j, "ms", {}, where);
  r.losses = field<std::vector<double>>(j, "losses", {}, where);
  r.ms_min = field<double>(j, "ms_min", 0, where);
  r.ms_median = field<double>(j, "ms_median", 0, where);
  r.ms_max = field<double>(j, "ms_max", 0, where);
  r.ms_mean = field<double>(j, "ms_mean", 0, where);
  r.images_per_s = as<double>(j["images_per_s"], where, "images_per_s");
  KILN_CHECK(std::isfinite(r.images_per_s) && r.images_per_s >= 0, where, ": 'images_per_s' is ",
             j["images_per_s"].dump(), ", not a finite number >= 0");
  r.wall_s = field<double>(j, "wall_s", 0, where);
  r.peak_bytes = field<int64_t>(j, "peak_bytes", 0, where);
  r.parameters = field<int64_t>(j, "parameters", 0, where);
  r.gflop_per_iter = field<double>(j, "gflop_per_iter", 0, where);
  r.gflops = field<double>(j, "gflops", 0, where);
  r.peak_gflops = field<double>(j, "peak_gflops", 0, where);
  r.of_peak = field<double>(j, "of_peak", 0, where);
  r.bandwidth_gbs = field<double>(j, "bandwidth_gbs", 0, where);
  if (j.contains("layers")) {
    KILN_CHECK(j["layers"].is_array(), where, ": 'layers' is not a list");
    for (const json& l : j["layers"]) {
      LayerRow row{field<std::string>(l, "name", "", where), field<std::string>(l, "kind", "", where),
                   field<double>(l, "forward_ms", 0, where), field<double>(l, "backward_ms", 0, where),
                   field<double>(l, "share", 0, where), field<double>(l, "gflop", 0, where)};
      row.gbytes = field<double>(l, "gbytes", 0, where);
      row.gflops = field<double>(l, "gflops", 0, where);
      row.of_peak = field<double>(l, "of_peak", 0, where);
      row.intensity = field<double>(l, "intensity", 0, where);
      row.memory_bound = field<bool>(l, "memory_bound", false, where);
      row.bound_ms = field<double>(l, "bound_ms", 0, where);
      row.of_bound = field<double>(l, "of_bound", 0, where);
      r.layers.push_back(row);
    }
  }
  return r;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

MachineInfo machine_info() {
  MachineInfo m;
  m.version = kiln::version();
  char host[256] = {};
  m.hostname = gethostname(host, sizeof host - 1) == 0 ? host : "unknown";
  m.cpu = cpu_model();
  m.cores = int(std::thread::hardware_concurrency());
  m.threads = num_threads();
  m.date = utc_now();
  return m;
}

std::string to_json(const Results& results) {
  const MachineInfo& m = results.machine;
  json runs = json::array();
  for (const RunResult& r : results.runs) runs.push_back(run_to_json(r));
  json j = {{"format", kFormat},
            {"machine",
             {{"framework", m.framework},
              {"version", m.version},
              {"hostname", m.hostname},
              {"cpu", m.cpu},
              {"cores", m.cores},
              {"threads", m.threads},
              {"date", m.date}}},
            {"runs", runs}};
  if (m.peak.threads > 0)
    j["machine"]["peak"] = {{"threads", m.peak.threads},         {"isa", m.peak.isa},
                            {"gflops", m.peak.gflops},           {"bf16_isa", m.peak.bf16_isa},
                            {"bf16_gflops", m.peak.bf16_gflops}, {"bandwidth_gbs", m.peak.bandwidth_gbs}};
  return j.dump(2) + "\n";
}

Results results_from_json(const std::string& text, const std::string& origin) {
  io::check_json_depth(text, origin);
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    KILN_THROW(origin, ": not valid JSON (", e.what(), ")");
  }
  KILN_CHECK(j.is_object() && j.contains("runs") && j.at("runs").is_array(), origin,
             ": not a kiln result file (no \"runs\" array)");
  Results res;
  try {
    if (j.contains("machine")) {
      const json& m = j.at("machine");
      const std::string where = origin + ": machine";
      res.machine.framework = field<std::string>(m, "framework", "kiln", where);
      res.machine.version = field<std::string>(m, "version", "", where);
      res.machine.hostname = field<std::string>(m, "hostname", "", where);
      res.machine.cpu = field<std::string>(m, "cpu", "", where);
      res.machine.cores = field<int>(m, "cores", 0, where);
      res.machine.threads = field<int>(m, "threads", 0, where);
      res.machine.date = field<std::string>(m, "date", "", where);
      if (m.contains("peak") && m.at("peak").is_object()) {
        const json& p = m.at("peak");
        const std::string pw = where + ": peak";
        res.machine.peak.threads = field<int>(p, "threads", 0, pw);
        res.machine.peak.isa = field<std::string>(p, "isa", "", pw);
        res.machine.peak.gflops = field<double>(p, "gflops", 0, pw);
        res.machine.peak.bf16_isa = field<std::string>(p, "bf16_isa", "", pw);
        res.machine.peak.bf16_gflops = field<double>(p, "bf16_gflops", 0, pw);
        res.machine.peak.bandwidth_gbs = field<double>(p, "bandwidth_gbs", 0, pw);
      }
    }
    int i = 0;
    for (const json& r : j.at("runs")) res.runs.push_back(run_from_json(r, origin + ": run " + std::to_string(i++)));
  } catch (const json::exception& e) {
    KILN_THROW(origin, ": a field has the wrong type (", e.what(), ")");
  }
  return res;
}

std::string csv_header() {
  return "model,device,backend,dtype,batch,mode,threads,iters,warmup,ms_min,ms_median,ms_max,ms_mean,images_per_s,"
         "peak_bytes,parameters,gflop_per_iter,gflops,hostname,peak_gflops,of_peak,bandwidth_gbs";
}

std::string to_csv(const Results& results) {
  std::ostringstream os;
  os.precision(10);
  os << csv_header() << "\n";
  for (const RunResult& r : results.runs) {
    os << csv_field(r.spec.model) << ',' << csv_field(r.spec.device) << ',' << csv_field(r.spec.backend) << ','
       << csv_field(r.spec.dtype) << ',' << r.spec.batch << ',' << (r.spec.train ? "train" : "forward") << ','
       << r.threads << ',' << r.spec.iters << ',' << r.spec.warmup << ',' << r.ms_min << ',' << r.ms_median << ','
       << r.ms_max << ',' << r.ms_mean << ',' << r.images_per_s << ',' << r.peak_bytes << ',' << r.parameters << ','
       << r.gflop_per_iter << ',' << r.gflops << ',' << csv_field(results.machine.hostname) << ',' << r.peak_gflops
       << ',' << r.of_peak << ',' << r.bandwidth_gbs << "\n";
  }
  return os.str();
}

void write_results(const Results& results, const std::string& path) {
  std::string text;
  if (ends_with(path, ".json"))
    text = to_json(results);
  else if (ends_with(path, ".csv"))
    text = to_csv(results);
  else
    KILN_THROW("--out ", path, ": the format comes from the extension, use .json or .csv");
  std::ofstream out(path, std::ios::binary);
  KILN_CHECK(out, "--out ", path, ": cannot open for writing");
  out << text;
  out.close();
  KILN_CHECK(out, "--out ", path, ": write failed");
}

Results read_results(const std::string& path) {
  std::string text;
  try {
    text = io::read_text_file(path, "result file");
  } catch (const Error& e) {
    KILN_THROW(path, ": cannot open (kiln compare and kiln plot read the .json files of kiln bench --out): ",
               e.message().empty() ? std::string(e.what()) : e.message());
  }
  return results_from_json(text, path);
}

Comparison compare(const Results& a, const Results& b, bool loose) {
  using StrictKey = std::tuple<std::string, int64_t, std::string, std::string, std::string>;
  using LooseKey = std::tuple<std::string, int64_t, std::string>;
  auto strict_key = [](const RunResult& r) {
    return StrictKey{r.spec.model, r.spec.batch, r.spec.train ? "train" : "forward", r.spec.device, r.spec.backend};
  };
  auto loose_key = [](const RunResult& r) {
    return LooseKey{r.spec.model, r.spec.batch, r.spec.train ? "train" : "forward"};
  };
  auto row = [](const RunResult& ra, const RunResult& rb) {
    CompareRow c;
    c.model = ra.spec.model;
    c.batch = ra.spec.batch;
    c.mode = ra.spec.train ? "train" : "forward";
    c.device_a = ra.spec.device;
    c.device_b = rb.spec.device;
    c.backend_a = ra.spec.backend;
    c.backend_b = rb.spec.backend;
    c.images_per_s_a = ra.images_per_s;
    c.images_per_s_b = rb.images_per_s;
    c.ratio = ra.images_per_s > 0 ? rb.images_per_s / ra.images_per_s : 0;
    return c;
  };

  Comparison cmp;
  if (!loose) {
    std::map<StrictKey, const RunResult*> in_b;
    for (const RunResult& r : b.runs) in_b.emplace(strict_key(r), &r);  // first occurrence wins
    for (const RunResult& r : a.runs) {
      auto it = in_b.find(strict_key(r));
      if (it != in_b.end()) cmp.rows.push_back(row(r, *it->second));
    }
  }
  if (cmp.rows.empty()) {
    cmp.loose = true;
    auto index = [&](const Results& res, const char* which) {
      std::map<LooseKey, const RunResult*> m;
      for (const RunResult& r : res.runs) {
        const bool fresh = m.emplace(loose_key(r), &r).second;
        KILN_CHECK(fresh, "compare: file ", which, " has more than one run of ", r.spec.model, " batch ", r.spec.batch,
                   " ", (r.spec.train ? "train" : "forward"),
                   " (backends or devices differ); matching on model, batch and mode needs one per file");
      }
      return m;
    };
    const auto in_a = index(a, "a"), in_b = index(b, "b");
    for (const RunResult& r : a.runs) {
      auto it = in_b.find(loose_key(r));
      if (it != in_b.end()) cmp.rows.push_back(row(r, *it->second));
    }
  }
  double log_sum = 0;
  int n = 0;
  for (const CompareRow& c : cmp.rows)
    if (c.ratio > 0) {
      log_sum += std::log(c.ratio);
      ++n;
    }
  cmp.geomean_ratio = n ? std::exp(log_sum / n) : 0;
  return cmp;
}

std::string comparison_table(const Comparison& c, const std::string& name_a, const std::string& name_b) {
  std::string out;
  char buf[512];
  std::snprintf(buf, sizeof buf, "a: %s\nb: %s\nrows matched on %s\n", name_a.c_str(), name_b.c_str(),
                c.loose ? "model, batch, mode (the files differ in backend or device)"
                        : "model, batch, mode, device, backend");
  out += buf;
  std::snprintf(buf, sizeof buf, "%-12s %6s %-8s %-16s %-16s %12s %12s %8s\n", "model", "batch", "mode", "a", "b",
                "a images/s", "b images/s", "b/a");
  out += buf;
  for (const CompareRow& r : c.rows) {
    const std::string da = r.device_a + "/" + r.backend_a, db = r.device_b + "/" + r.backend_b;
    std::snprintf(buf, sizeof buf, "%-12s %6lld %-8s %-16s %-16s %12.1f %12.1f %8.3f\n", r.model.c_str(),
                  static_cast<long long>(r.batch), r.mode.c_str(), da.c_str(), db.c_str(), r.images_per_s_a,
                  r.images_per_s_b, r.ratio);
    out += buf;
  }
  if (c.rows.empty())
    out += "no rows in common\n";
  else {
    std::snprintf(buf, sizeof buf, "geometric mean of b/a over %zu rows: %.3f\n", c.rows.size(), c.geomean_ratio);
    out += buf;
  }
  return out;
}

}  // namespace kiln::bench
