// `kiln scale`'s published tables (dist/scale.h): the reader of dist/reference/scaling.csv, the
// model's predictions beside the published rows, and the fit of the effects no publication gives.
// The model itself is in dist/scale.cpp.
//   ctest --test-dir build -R dist.test_scale
#include "dist/scale.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "dist/scale_detail.h"
#include "engine/error.h"

namespace kiln::dist {

using scale_detail::read_text;

namespace {

// A whole decimal integer in [lo, hi]; the error names the line, the column and the text.
int64_t whole_number(const std::string& text, const std::string& where, const char* column, int64_t lo, int64_t hi) {
  char* end = nullptr;
  errno = 0;
  const long long v = text.empty() ? 0 : std::strtoll(text.c_str(), &end, 10);
  KILN_CHECK(!text.empty() && end == text.c_str() + text.size() && errno == 0 && v >= lo && v <= hi, where, ": ",
             column, " '", text, "' is not a whole number in [", lo, ", ", hi, "]");
  return v;
}

}  // namespace

// --- published tables ----------------------------------------------------------------------

std::vector<ReferenceRow> reference_from_csv(const std::string& text, const std::string& origin) {
  std::vector<ReferenceRow> rows;
  std::vector<std::pair<std::string, std::string>> publications;  // "#@ source | publication"
  std::vector<std::pair<std::string, TableEffect>> effects;         // "#% table | name=value | source"
  auto trim = [](std::string x) {
    x.erase(0, x.find_first_not_of(' '));
    x.erase(x.find_last_not_of(' ') + 1);
    return x;
  };
  std::istringstream in(text);
  std::string line;
  int lineno = 0;
  bool header = true;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind("#@", 0) == 0) {
      const size_t bar = line.find('|');
      KILN_CHECK(bar != std::string::npos, origin, " line ", lineno, ": a publication line is '#@ source | publication'");
      publications.push_back({trim(line.substr(2, bar - 2)), trim(line.substr(bar + 1))});
      continue;
    }
    if (line.rfind("#%", 0) == 0) {
      const std::string where = origin + ":" + std::to_string(lineno);
      const size_t bar1 = line.find('|'), bar2 = bar1 == std::string::npos ? bar1 : line.find('|', bar1 + 1);
      KILN_CHECK(bar2 != std::string::npos, where, ": an effect line is '#% table | name=value | source'");
      const std::string table = trim(line.substr(2, bar1 - 2)), assignment = trim(line.substr(bar1 + 1, bar2 - bar1 - 1));
      const size_t eq = assignment.find('=');
      KILN_CHECK(!table.empty() && eq != std::string::npos, where, ": an effect line is '#% table | name=value | source'");
      TableEffect e;
      e.name = trim(assignment.substr(0, eq));
      const std::string value = trim(assignment.substr(eq + 1));
      char* end = nullptr;
      errno = 0;
      e.value = value.empty() ? 0 : std::strtod(value.c_str(), &end);
      KILN_CHECK(!value.empty() && end == value.c_str() + value.size() && errno == 0, where, ": effect ", e.name,
                 " has value '", value, "', not a number");
      ScaleOptions probe;
      try {
        apply_effect(probe, e.name, e.value);
      } catch (const Error& err) {
        KILN_THROW(where, ": ", err.message().empty() ? std::string(err.what()) : err.message());
      }
      e.source = trim(line.substr(bar2 + 1));
      KILN_CHECK(!e.source.empty(), where, ": effect ", e.name, " names no source");
      effects.push_back({table, e});
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    if (header) {  // table,source,model,gpu,batch,nodes,gpus,images_per_s,intra,inter,algorithm,notes
      header = false;
      continue;
    }
    std::vector<std::string> f;
    std::stringstream ss(line);
    std::string cell;
    while (f.size() < 11 && std::getline(ss, cell, ',')) f.push_back(cell);
    std::string notes;
    std::getline(ss, notes);
    const std::string where = origin + ":" + std::to_string(lineno);
    KILN_CHECK(f.size() == 11, where, ": expected 12 columns (table,source,model,gpu,batch,nodes,gpus,",
               "images_per_s,intra,inter,algorithm,notes), got ", f.size());
    ReferenceRow r;
    r.table = f[0];
    r.source = f[1];
    r.model = f[2];
    r.gpu = f[3];
    r.batch = whole_number(f[4], where, "batch", 1, int64_t(1) << 30);
    r.gpus = int(whole_number(f[6], where, "gpus", 1, kMaxGpus));
    r.nodes = int(whole_number(f[5], where, "nodes", 1, r.gpus));
    {
      char* end = nullptr;
      errno = 0;
      r.images_per_s = f[7].empty() ? 0 : std::strtod(f[7].c_str(), &end);
      KILN_CHECK(!f[7].empty() && end == f[7].c_str() + f[7].size() && errno == 0 && std::isfinite(r.images_per_s) &&
                     r.images_per_s > 0,
                 where, ": images_per_s '", f[7], "' is not a finite number > 0");
    }
    r.intra = f[8];
    r.inter = f[9];
    r.algorithm = f[10];
    r.notes = notes;
    rows.push_back(r);
  }
  for (ReferenceRow& r : rows) {
    for (const auto& [id, text] : publications)
      if (r.source == id) r.publication = text;
    for (const auto& [table, e] : effects)
      if (r.table == table) r.effects.push_back(e);
  }
  for (const auto& te : effects) {
    const std::string& table = te.first;  // a named copy: lambdas may not capture structured bindings (C++17)
    KILN_CHECK(std::any_of(rows.begin(), rows.end(), [&](const ReferenceRow& r) { return r.table == table; }), origin,
               ": effect ", te.second.name, " is for table '", table, "', which has no rows");
  }
  return rows;
}

std::vector<ReferenceRow> load_reference(const std::string& path) { return reference_from_csv(read_text(path), path); }

namespace {

StepPrediction predict_row(const DeviceProfile& p, const ReferenceRow& r, ScaleOptions o) {
  if (!r.algorithm.empty()) o.algorithm = algorithm_from_name(r.algorithm);
  const Network net{link_preset(r.intra), link_preset(r.inter)};
  return simulate_step(at_batch(p, r.batch), r.gpus, r.nodes, net, o);
}

}  // namespace

ComparisonResult compare_table(const DeviceProfile& measured, const std::vector<ReferenceRow>& table,
                               const ScaleOptions& o) {
  KILN_CHECK(!table.empty(), "scale: no published rows to compare");
  const ReferenceRow* base = &table.front();
  for (const ReferenceRow& r : table)
    if (r.gpus < base->gpus || (r.gpus == base->gpus && r.batch > base->batch)) base = &r;
  ScaleOptions o_table = o;
  for (const TableEffect& e : base->effects) apply_effect(o_table, e.name, e.value);
  const DeviceProfile at_base = at_batch(measured, base->batch);
  // One calibration for the whole table: the device speed (the profile's compute alone, one
  // device) that reproduces the base row with its communication and fixed costs.
  ComparisonResult out;
  auto predicted_base = [&](double device_ips) {
    return predict_row(calibrated(at_base, device_ips), *base, o_table).images_per_s;
  };
  // Predicted throughput rises with device speed, towards what the network and fixed costs allow.
  double lo = base->images_per_s / base->gpus, hi = lo;
  for (int i = 0; i < 60 && predicted_base(hi) < base->images_per_s; ++i) hi *= 2;
  KILN_CHECK(predicted_base(hi) >= base->images_per_s, "scale: table '", base->table, "': no device speed gives ",
             base->images_per_s, " images/s on ", base->gpus, " GPUs over ", base->intra, "/", base->inter,
             " (the network and fixed costs alone are slower)");
  // To 1e-12 of the speed, far below any effect on a row; fit_effects calls this hundreds of times.
  for (int i = 0; i < 100 && hi - lo > 1e-12 * hi; ++i) {
    const double mid = 0.5 * (lo + hi);
    (predicted_base(mid) < base->images_per_s ? lo : hi) = mid;
  }
  const double device_ips = 0.5 * (lo + hi);
  out.device_images_per_s = device_ips;
  out.options = o_table;
  const DeviceProfile cal = calibrated(at_base, device_ips);
  const double base_pub = base->images_per_s / base->gpus;
  const double base_pred = predict_row(cal, *base, o_table).images_per_s / base->gpus;
  for (const ReferenceRow& r : table) {
    Comparison c;
    c.row = r;
    c.predicted = predict_row(cal, r, o_table);
    // Per-GPU throughput relative to the base row's, on both sides alike: a row at another batch
    // than the base's so carries the batch's effect (the fixed per-step cost), as published.
    c.published_efficiency = r.images_per_s / r.gpus / base_pub;
    c.predicted_efficiency = c.predicted.images_per_s / r.gpus / base_pred;
    c.calibration = &r == base;
    out.rows.push_back(c);
  }
  return out;
}

std::vector<ReferenceRow> with_effects(std::vector<ReferenceRow> rows, const std::vector<TableEffect>& effects) {
  for (ReferenceRow& r : rows)
    for (const TableEffect& e : effects) {
      auto same = [&](const TableEffect& x) { return x.name == e.name; };
      auto it = std::find_if(r.effects.begin(), r.effects.end(), same);
      if (it == r.effects.end()) r.effects.push_back(e);
      else *it = e;
    }
  return rows;
}

// --- fitting the effects no publication gives ----------------------------------------------

namespace {

// What fit_effects may set, and over what range: wider than any table here needs (the values
// chosen by hand were at most 0.12 and 40 ms), narrow enough for a grid of kFitGrid to bracket.
struct FitRange {
  const char* name;
  double hi;
};
constexpr FitRange kFitRanges[] = {{"jitter", 0.5}, {"node_jitter", 0.5}, {"fixed_ms", 200}};
constexpr int kFitGrid = 16;

// Whether the rows can tell the effect apart at all. A per-step fixed cost shows only against
// another batch size: at one batch the calibration absorbs it, and all that is left is a faint
// dilution of the communication, a flat valley with jitter that the search would follow to the end
// of the range. Stragglers among nodes need one node count with two GPU counts besides a row on
// several nodes: at a constant number of GPUs per node they grow with the count as per-GPU ones do.
bool determined(const std::string& name, const std::vector<std::vector<ReferenceRow>>& tables) {
  std::set<int64_t> batches;
  std::map<int, std::set<int>> gpus_on;  // node count -> GPU counts
  for (const std::vector<ReferenceRow>& t : tables)
    for (const ReferenceRow& r : t) {
      batches.insert(r.batch);
      gpus_on[r.nodes].insert(r.gpus);
    }
  if (name == "fixed_ms") return batches.size() > 1;
  if (name == "node_jitter")
    return gpus_on.rbegin()->first > 1 &&
           std::any_of(gpus_on.begin(), gpus_on.end(), [](const auto& n) { return n.second.size() > 1; });
  return true;
}

// The error over every row but the calibration rows, in points of efficiency.
EffectFit fit_error(const DeviceProfile& p, const std::vector<std::vector<ReferenceRow>>& tables,
                    const std::vector<TableEffect>& effects, const ScaleOptions& o) {
  EffectFit f;
  f.effects = effects;
  double squares = 0;
  for (const std::vector<ReferenceRow>& t : tables)
    for (const Comparison& c : compare_table(p, with_effects(t, effects), o).rows) {
      if (c.calibration) continue;
      squares += c.error_points() * c.error_points();
      f.worst_points = std::max(f.worst_points, std::fabs(c.error_points()));
      f.rows++;
    }
  f.rms_points = f.rows > 0 ? std::sqrt(squares / f.rows) : 0;
  return f;
}

// The x in [0, hi] that minimises f: a grid brackets the minimum (f need not be unimodal over the
// whole range; the fusion cycle's phases leave small steps in it), then golden-section search
// narrows the bracket to 1e-4 of the range.
double minimise(const std::function<double(double)>& f, double hi) {
  int best = 0;
  double f_best = f(0);
  for (int i = 1; i <= kFitGrid; ++i) {
    const double v = f(hi * i / kFitGrid);
    if (v < f_best) f_best = v, best = i;
  }
  double a = hi * std::max(0, best - 1) / kFitGrid, b = hi * std::min(kFitGrid, best + 1) / kFitGrid;
  const double g = (std::sqrt(5.0) - 1) / 2;
  double c = b - g * (b - a), d = a + g * (b - a), fc = f(c), fd = f(d);
  while (b - a > 1e-4 * hi) {
    if (fc <= fd) {
      b = d, d = c, fd = fc;
      c = b - g * (b - a), fc = f(c);
    } else {
      a = c, c = d, fc = fd;
      d = a + g * (b - a), fd = f(d);
    }
  }
  // The grid point wins where the bracket's interior is no better (a minimum at 0 or hi).
  return std::min(fc, fd) < f_best ? (fc <= fd ? c : d) : hi * best / kFitGrid;
}

}  // namespace

EffectFit fit_effects(const DeviceProfile& measured, const std::vector<std::vector<ReferenceRow>>& tables,
                      const std::vector<std::string>& names, const ScaleOptions& o) {
  KILN_CHECK(!names.empty(), "scale: fit_effects: no effect named to fit");
  std::vector<double> hi;
  for (const std::string& n : names) {
    auto named = [&](const FitRange& r) { return n == r.name; };
    auto it = std::find_if(std::begin(kFitRanges), std::end(kFitRanges), named);
    KILN_CHECK(it != std::end(kFitRanges), "scale: cannot fit effect '", n,
               "' (fitted: jitter, node_jitter, fixed_ms)");
    KILN_CHECK(std::count(names.begin(), names.end(), n) == 1, "scale: fit_effects: effect '", n, "' named twice");
    hi.push_back(it->hi);
  }
  std::vector<TableEffect> effects;
  for (const std::string& n : names) effects.push_back(TableEffect{n, 0, ""});
  const int rows = fit_error(measured, tables, effects, o).rows;
  KILN_CHECK(rows > 0, "scale: fit_effects: no row to fit besides the calibration rows");
  std::vector<std::string> undetermined;
  for (TableEffect& e : effects) {
    const bool fit = determined(e.name, tables);
    e.source = fit ? "fitted by fit_effects to " + std::to_string(rows) + " rows" : "0: the rows cannot determine it";
    if (!fit) undetermined.push_back(e.name);
  }
  // Coordinate search: the effects are few (at most two per table here) and the RMS is smooth
  // in each, so one at a time converges in a few sweeps where a grid over all would cost its power.
  for (int sweep = 0; sweep < 20; ++sweep) {
    double moved = 0;
    for (size_t k = 0; k < effects.size(); ++k) {
      if (std::find(undetermined.begin(), undetermined.end(), effects[k].name) != undetermined.end()) continue;
      const double before = effects[k].value;
      effects[k].value = minimise(
          [&](double v) {
            effects[k].value = v;
            return fit_error(measured, tables, effects, o).rms_points;
          },
          hi[k]);
      moved = std::max(moved, std::fabs(effects[k].value - before) / hi[k]);
    }
    if (moved < 1e-3 || effects.size() - undetermined.size() <= 1) break;
  }
  EffectFit f = fit_error(measured, tables, effects, o);
  f.undetermined = undetermined;
  return f;
}

}  // namespace kiln::dist
