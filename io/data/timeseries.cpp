// Time-series tables, windows, normalisation, splits by time and a synthetic traffic series. See
// timeseries.h.
//   build/tests/kiln_tests_io --source-file='*test_timeseries.cpp'
#include "io/data/timeseries.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "engine/checked_size.h"
#include "engine/error.h"
#include "io/formats/digest.h"
#include "io/formats/file_bytes.h"
#include "io/formats/npy.h"

namespace kiln {

namespace {

// ---- CSV parsing ---------------------------------------------------------------------------

enum class Parsed { number, not_number, out_of_range };

// Full-consumption parse: from_chars takes no locale, no leading space and no '+', so one '+' is
// allowed here by hand and anything left over makes the field not a number.
Parsed parse_number(std::string_view s, double& value) {
  if (s.size() > 1 && s.front() == '+' && s[1] != '-' && s[1] != '+') s.remove_prefix(1);
  if (s.empty()) return Parsed::not_number;
  const char* end = s.data() + s.size();
  auto r = std::from_chars(s.data(), end, value);
  if (r.ec == std::errc::result_out_of_range) return Parsed::out_of_range;
  if (r.ec != std::errc() || r.ptr != end) return Parsed::not_number;
  return Parsed::number;
}

std::string_view trim_field(std::string_view s, char sep) {
  auto space = [sep](char c) { return c == ' ' || (c == '\t' && sep != '\t'); };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
  return s;
}

void split_fields(std::string_view line, char sep, std::vector<std::string_view>& out) {
  out.clear();
  size_t start = 0;
  for (;;) {
    size_t p = line.find(sep, start);
    if (p == std::string_view::npos) {
      out.push_back(trim_field(line.substr(start), sep));
      return;
    }
    out.push_back(trim_field(line.substr(start, p - start), sep));
    start = p + 1;
  }
}

// A field as messages quote it: at most 40 characters.
std::string quoted(std::string_view s) {
  if (s.size() <= 40) return "'" + std::string(s) + "'";
  return "'" + std::string(s.substr(0, 37)) + "...'";
}

// Where a value sits, for messages: "traffic.csv: line 3, column 2 (bytes_out)".
struct CsvContext {
  std::string file;
  bool header = false;
  const TimeTable* table = nullptr;
  std::string where(int64_t line, size_t col) const {
    std::string s = file + ": line " + std::to_string(line) + ", column " + std::to_string(col + 1);
    if (header) s += " (" + table->names[col] + ")";
    return s;
  }
};

// The first line: names when any field is not a number (then true), else the first data row.
bool start_table(const std::vector<std::string_view>& fields, const CsvOptions& options, CsvContext& ctx,
                 TimeTable& table) {
  KILN_CHECK(int64_t(fields.size()) <= options.max_values, ctx.file, ": line 1 has ", fields.size(),
             " fields, over the limit of ", options.max_values, " values (CsvOptions::max_values)");
  table.cols = int64_t(fields.size());
  bool header = false;
  for (std::string_view f : fields) {
    double v;
    if (parse_number(f, v) == Parsed::not_number) header = true;
  }
  std::unordered_map<std::string, size_t> seen;  // a set, not a scan: a header may be very wide
  for (size_t c = 0; c < fields.size(); ++c) {
    std::string name = header && !fields[c].empty() ? std::string(fields[c]) : "c" + std::to_string(c);
    auto [it, fresh] = seen.emplace(name, c);
    KILN_CHECK(fresh, ctx.file, ": line 1, column ", c + 1, ": the name '", name, "' is also column ", it->second + 1);
    table.names.push_back(std::move(name));
  }
  ctx.header = header;
  return header;
}

void append_row(const std::vector<std::string_view>& fields, int64_t line, const CsvOptions& options,
                const CsvContext& ctx, TimeTable& table) {
  const size_t cols = size_t(table.cols);
  if (fields.size() != cols) {
    std::string which = fields.size() < cols ? " (column " + std::to_string(fields.size() + 1) + " is missing)"
                                             : " (column " + std::to_string(cols + 1) + " is extra)";
    KILN_THROW(ctx.file, ": line ", line, " has ", fields.size(), " fields, ",
               ctx.header ? "the header has " : "line 1 has ", cols, which);
  }
  KILN_CHECK(int64_t(table.values.size()) <= options.max_values - table.cols, ctx.file, ": line ", line,
             ": the table passes ", options.max_values, " values (CsvOptions::max_values)");
  for (size_t c = 0; c < cols; ++c) {
    double v = 0;
    switch (parse_number(fields[c], v)) {
      case Parsed::number: break;
      case Parsed::out_of_range:
        KILN_THROW(ctx.where(line, c), ": ", quoted(fields[c]), " is out of float64 range");
      case Parsed::not_number:
        KILN_CHECK(!fields[c].empty(), ctx.where(line, c), ": empty field (missing values are not supported)");
        KILN_THROW(ctx.where(line, c), ": ", quoted(fields[c]), " is not a number");
    }
    KILN_CHECK(!std::isnan(v), ctx.where(line, c), ": NaN (missing values are not supported)");
    KILN_CHECK(std::isfinite(v), ctx.where(line, c), ": ", quoted(fields[c]), " is infinite");
    table.values.push_back(v);
  }
  ++table.rows;
}

}  // namespace

// ---- TimeTable -----------------------------------------------------------------------------

int64_t TimeTable::column(const std::string& name_or_index) const {
  for (size_t c = 0; c < names.size(); ++c)
    if (names[c] == name_or_index) return int64_t(c);
  const std::string& s = name_or_index;
  if (!s.empty() && s.size() <= 18 && std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
    int64_t index = std::stoll(s);
    KILN_CHECK(index < cols, label(), ": column index ", index, " out of range: the table has ", cols, " columns");
    return index;
  }
  std::string known;
  for (size_t c = 0; c < names.size() && c < 20; ++c) known += (c ? ", " : "") + names[c];
  if (names.size() > 20) known += ", ...";
  KILN_THROW(label(), ": no column '", s, "' (columns: ", known, ")");
}

std::string TimeTable::label() const { return source.empty() ? "generated" : io::base_name(source); }

TimeTable read_csv_table(const std::string& path, const CsvOptions& options) {
  const char sep = options.separator;
  KILN_CHECK(sep == ',' || sep == ';' || sep == '\t', "read_csv_table: the separator must be ',', ';' or tab, not '",
             sep, "'");
  KILN_CHECK(options.max_values > 0, "read_csv_table: max_values must be positive");
  io::RegularFile file(path);
  const std::vector<uint8_t> bytes = file.read_all(options.max_bytes, "CSV table");
  std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);

  TimeTable table;
  table.source = path;
  CsvContext ctx{io::base_name(path), false, &table};
  KILN_CHECK(!text.empty(), ctx.file, ": the file is empty (no header and no rows)");
  std::vector<std::string_view> fields;
  int64_t line_no = 0;
  for (size_t pos = 0; pos <= text.size();) {
    const size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() + 1 : nl + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    KILN_CHECK(!line.empty(), ctx.file, ": line ", line_no, " is empty (only empty lines at the end are ignored)");
    split_fields(line, sep, fields);
    if (line_no == 1 && start_table(fields, options, ctx, table)) continue;
    append_row(fields, line_no, options, ctx, table);
  }
  KILN_CHECK(table.rows > 0, ctx.file, ": a header (line 1) and no data rows");
  return table;
}

TimeTable read_npy_table(const std::string& path) {
  const Tensor t = read_npy(path);
  const std::string file = io::base_name(path);
  KILN_CHECK(t.dim() == 1 || t.dim() == 2, file, ": a time-series table needs a 1-d or 2-d array, not ",
             shape_str(t.sizes()));
  KILN_CHECK(t.numel() > 0, file, ": the array ", shape_str(t.sizes()), " is empty");
  KILN_CHECK(t.numel() <= kMaxTableValues, file, ": ", t.numel(), " values, over the limit of ", kMaxTableValues);
  TimeTable table;
  table.source = path;
  table.rows = t.size(0);
  table.cols = t.dim() == 2 ? t.size(1) : 1;
  for (int64_t c = 0; c < table.cols; ++c) table.names.push_back("c" + std::to_string(c));
  table.values = t.to_vector();
  for (size_t i = 0; i < table.values.size(); ++i) {
    const double v = table.values[i];
    KILN_CHECK(std::isfinite(v), file, ": row ", int64_t(i) / table.cols + 1, ", column ", int64_t(i) % table.cols + 1,
               ": ", std::isnan(v) ? "NaN" : "inf", " (every value must be finite)");
  }
  return table;
}

void write_csv_table(const std::string& path, const TimeTable& table, char separator) {
  KILN_CHECK(separator == ',' || separator == ';' || separator == '\t',
             "write_csv_table: the separator must be ',', ';' or tab");
  KILN_CHECK(table.rows > 0 && table.cols > 0 && int64_t(table.names.size()) == table.cols &&
                 int64_t(table.values.size()) == table.rows * table.cols,
             "write_csv_table: ", table.label(), ": inconsistent table (", table.rows, " x ", table.cols, ", ",
             table.names.size(), " names, ", table.values.size(), " values)");
  std::string out;
  for (size_t c = 0; c < table.names.size(); ++c) {
    const std::string& n = table.names[c];
    double v;
    // A name the reader would take for a number, or trim away, would not read back as a header.
    KILN_CHECK(!n.empty() && n.find_first_of(std::string("\"\r\n") + separator) == std::string::npos &&
                   n == std::string(trim_field(n, separator)) && parse_number(n, v) == Parsed::not_number,
               "write_csv_table: column ", c + 1, ": the name '", n, "' cannot be written as a CSV header");
    out += (c ? std::string(1, separator) : "") + n;
  }
  out += '\n';
  char buf[64];
  for (int64_t r = 0; r < table.rows; ++r) {
    for (int64_t c = 0; c < table.cols; ++c) {
      const double v = table.at(r, c);
      KILN_CHECK(std::isfinite(v), "write_csv_table: row ", r + 1, ", column ", c + 1, ": not finite");
      if (c) out += separator;
      auto res = std::to_chars(buf, buf + sizeof buf, v);
      out.append(buf, res.ptr);
    }
    out += '\n';
  }
  io::write_file_atomic(path, out);
}

// ---- Normalisation -------------------------------------------------------------------------

double NormStats::normalise(double value, int64_t column) const {
  if (empty()) return value;
  KILN_CHECK(column >= 0 && column < int64_t(mean.size()), "NormStats: column ", column, " out of range [0, ",
             mean.size(), ")");
  return (value - mean[size_t(column)]) / std[size_t(column)];
}

double NormStats::denormalise(double value, int64_t column) const {
  if (empty()) return value;
  KILN_CHECK(column >= 0 && column < int64_t(mean.size()), "NormStats: column ", column, " out of range [0, ",
             mean.size(), ")");
  return value * std[size_t(column)] + mean[size_t(column)];
}

namespace {

Tensor map_columns(const NormStats& s, const Tensor& values, const std::vector<int64_t>& columns, bool forward) {
  const char* op = forward ? "NormStats::normalise" : "NormStats::denormalise";
  KILN_CHECK(values.defined() && values.is_floating_point() && values.dim() >= 1, op,
             ": needs a floating-point tensor of at least one dim");
  KILN_CHECK(values.sizes().back() == int64_t(columns.size()), op, ": the last dim of ", shape_str(values.sizes()),
             " must match the ", columns.size(), " columns");
  std::vector<double> v = values.to_vector();
  const size_t n = columns.size();
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = forward ? s.normalise(v[i], columns[i % n]) : s.denormalise(v[i], columns[i % n]);
  return from_vector(v, values.sizes(), values.dtype());
}

}  // namespace

Tensor NormStats::normalise(const Tensor& values, const std::vector<int64_t>& columns) const {
  return map_columns(*this, values, columns, true);
}

Tensor NormStats::denormalise(const Tensor& values, const std::vector<int64_t>& columns) const {
  return map_columns(*this, values, columns, false);
}

NormStats compute_norm_stats(const TimeTable& table, int64_t begin, int64_t end) {
  KILN_CHECK(0 <= begin && begin < end && end <= table.rows, "compute_norm_stats: ", table.label(), ": rows [", begin,
             ", ", end, ") are not a non-empty range of the table's ", table.rows);
  NormStats s;
  const double n = double(end - begin);
  for (int64_t c = 0; c < table.cols; ++c) {
    double sum = 0;
    for (int64_t r = begin; r < end; ++r) sum += table.at(r, c);
    const double mean = sum / n;
    double ss = 0;
    for (int64_t r = begin; r < end; ++r) ss += (table.at(r, c) - mean) * (table.at(r, c) - mean);
    double sd = std::sqrt(ss / n);
    // A constant column: its mean may round, leaving deviations of a few ulps; treat as 0.
    if (!(sd > 1e-12 * std::max(1.0, std::fabs(mean)))) sd = 1;
    s.mean.push_back(mean);
    s.std.push_back(sd);
  }
  return s;
}

// ---- Windows -------------------------------------------------------------------------------

namespace {

std::vector<int64_t> resolve_columns(const TimeTable& table, const std::vector<std::string>& names) {
  std::vector<int64_t> out;
  if (names.empty())
    for (int64_t c = 0; c < table.cols; ++c) out.push_back(c);
  for (const std::string& n : names) out.push_back(table.column(n));
  return out;
}

}  // namespace

TimeSeriesDataset::TimeSeriesDataset(std::shared_ptr<const TimeTable> table, int64_t begin, int64_t end,
                                     const TimeSeriesOptions& options, NormStats stats, std::string split)
    : table_(std::move(table)), begin_(begin), end_(end), options_(options), stats_(std::move(stats)),
      split_(std::move(split)) {
  KILN_CHECK(table_ != nullptr, "TimeSeriesDataset: no table");
  const std::string file = table_->label();
  KILN_CHECK(options_.window >= 1 && options_.horizon >= 1 && options_.stride >= 1, "TimeSeriesDataset: window ",
             options_.window, ", horizon ", options_.horizon, " and stride ", options_.stride, " must be >= 1");
  KILN_CHECK(0 <= begin && begin <= end && end <= table_->rows, "TimeSeriesDataset: rows [", begin, ", ", end,
             ") are outside the table's [0, ", table_->rows, ") (file ", file, ")");
  const uint64_t need =
      checked_add(uint64_t(options_.window), uint64_t(options_.horizon), "TimeSeriesDataset: window + horizon");
  KILN_CHECK(uint64_t(end - begin) >= need, "a window of ", options_.window, " steps and horizon ", options_.horizon,
             " needs ", need, " rows, the ", split_, " has ", end - begin, " (file ", file, ")");
  size_ = (end - begin - int64_t(need)) / options_.stride + 1;
  inputs_ = resolve_columns(*table_, options_.inputs);
  targets_ = resolve_columns(*table_, options_.targets);
  if (!options_.normalise) {
    stats_ = NormStats{};
  } else if (stats_.empty()) {
    stats_ = compute_norm_stats(*table_, begin, end);
  } else {
    KILN_CHECK(int64_t(stats_.mean.size()) == table_->cols && int64_t(stats_.std.size()) == table_->cols,
               "TimeSeriesDataset: statistics for ", stats_.mean.size(), " columns, the table has ", table_->cols,
               " (file ", file, ")");
  }
}

int64_t TimeSeriesDataset::first_row(int64_t index) const {
  KILN_CHECK(index >= 0 && index < size_, "TimeSeriesDataset: index ", index, " out of range [0, ", size_, ") (",
             split_, ", file ", table_->label(), ")");
  return begin_ + index * options_.stride;
}

Example TimeSeriesDataset::get(int64_t index) const {
  const int64_t t = first_row(index);
  const int64_t w = options_.window, ni = int64_t(inputs_.size()), nt = int64_t(targets_.size());
  Tensor x = empty({w, ni}, float32);
  float* xd = x.data<float>();
  for (int64_t r = 0; r < w; ++r)
    for (int64_t k = 0; k < ni; ++k) {
      const int64_t c = inputs_[size_t(k)];
      xd[r * ni + k] = float(stats_.normalise(table_->at(t + r, c), c));
    }
  Tensor y = empty({nt}, float32);
  float* yd = y.data<float>();
  const int64_t tr = target_row(index);
  for (int64_t k = 0; k < nt; ++k) {
    const int64_t c = targets_[size_t(k)];
    yd[k] = float(stats_.normalise(table_->at(tr, c), c));
  }
  return {x, y};
}

ForecastScores last_value_forecast(const TimeSeriesDataset& data) {
  const std::vector<int64_t>& in = data.input_columns();
  const std::vector<int64_t>& out = data.target_columns();
  std::vector<int64_t> at;  // each target's position among the inputs
  for (int64_t c : out) {
    const auto it = std::find(in.begin(), in.end(), c);
    KILN_CHECK(it != in.end(), "last-value forecast: target column ", data.table().names[size_t(c)],
               " is not an input column (", data.table().label(), ")");
    at.push_back(int64_t(it - in.begin()));
  }
  ForecastScores s;
  double se = 0, ae = 0;
  const int64_t w = data.options().window, ni = int64_t(in.size());
  for (int64_t i = 0; i < data.size(); ++i) {
    const Example e = data.get(i);
    const float* x = e.input.data<float>();
    const float* y = e.target.data<float>();
    for (size_t k = 0; k < at.size(); ++k) {
      const double d = double(x[(w - 1) * ni + at[k]]) - double(y[k]);
      se += d * d;
      ae += std::abs(d);
    }
  }
  s.samples = data.size();
  const double n = double(data.size()) * double(out.size());
  if (n > 0) {
    s.mse = se / n;
    s.mae = ae / n;
  }
  return s;
}

std::string TimeSeriesDataset::source(int64_t index) const {
  const int64_t t = first_row(index);
  return table_->label() + ": rows " + std::to_string(t) + "-" + std::to_string(t + options_.window - 1) + " -> row " +
         std::to_string(target_row(index));
}

// ---- Splits --------------------------------------------------------------------------------

TimeSeriesSplits split_by_time(std::shared_ptr<const TimeTable> table, const TimeSeriesOptions& options,
                               double train_fraction, double val_fraction) {
  KILN_CHECK(table != nullptr, "split_by_time: no table");
  KILN_CHECK(train_fraction > 0 && train_fraction <= 1 && val_fraction >= 0 && val_fraction < 1 &&
                 train_fraction + val_fraction <= 1 + 1e-9,
             "split_by_time: fractions train ", train_fraction, " and val ", val_fraction,
             " must be in (0, 1] and [0, 1) with a sum of at most 1");
  const int64_t n = table->rows;
  // The slack keeps 0.29 * 100 (28.999...) at 29 rows; it is far above the rounding of f * n.
  auto rows_of = [n](double f) { return std::min(n, int64_t(std::floor(f * double(n) + 1e-6))); };
  TimeSeriesSplits s;
  s.table = table;
  s.train_end = rows_of(train_fraction);
  s.val_end = train_fraction + val_fraction >= 1 - 1e-9 ? n : std::min(n, s.train_end + rows_of(val_fraction));
  // The training split's own statistics (computed by its constructor) are the ones all share.
  s.train = std::make_shared<TimeSeriesDataset>(table, 0, s.train_end, options, NormStats{}, "training split");
  s.stats = s.train->stats();
  if (val_fraction > 0)
    s.val = std::make_shared<TimeSeriesDataset>(table, s.train_end, s.val_end, options, s.stats, "validation split");
  if (s.val_end < n)
    s.test = std::make_shared<TimeSeriesDataset>(table, s.val_end, n, options, s.stats, "test split");
  return s;
}

TimeSeriesSplits split_by_time(TimeTable table, const TimeSeriesOptions& options, double train_fraction,
                               double val_fraction) {
  return split_by_time(std::make_shared<const TimeTable>(std::move(table)), options, train_fraction, val_fraction);
}

// ---- Synthetic traffic ---------------------------------------------------------------------

namespace {

constexpr double kPi = 3.14159265358979323846;

// splitmix64 (Steele, Lea, Flood 2014): a private, seedable stream.
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return double(next() >> 11) * 0x1p-53; }  // [0, 1)
  double normal() {  // Box-Muller; 1 - u is in (0, 1], so the log is finite
    const double u1 = 1.0 - uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * kPi * u2);
  }
};

// Daily profile, mean 1: lowest (0.35) at 04:00, highest (1.65) at 20:00.
double daily_profile(int64_t hour) {
  const double h = double(hour);
  return 1.0 + 0.55 * std::cos(2.0 * kPi * (h - 18.0) / 24.0) + 0.2 * std::cos(2.0 * kPi * (h - 21.0) / 12.0);
}

}  // namespace

TimeTable synthetic_traffic(int64_t rows, uint64_t seed, const SyntheticTrafficOptions& options) {
  KILN_CHECK(rows >= 1 && rows <= kMaxTableValues / 3, "synthetic_traffic: rows ", rows, " must be in [1, ",
             kMaxTableValues / 3, "]");
  KILN_CHECK(std::isfinite(options.noise) && options.noise >= 0 && options.noise <= 1, "synthetic_traffic: noise ",
             options.noise, " must be in [0, 1]");
  KILN_CHECK(options.burst_rate >= 0 && options.burst_rate <= 1, "synthetic_traffic: burst_rate ", options.burst_rate,
             " must be in [0, 1]");
  const double years = double(rows - 1) / (24.0 * 365.0);
  KILN_CHECK(std::isfinite(options.trend) && 1.0 + std::min(0.0, options.trend) * years > 0.05,
             "synthetic_traffic: trend ", options.trend, " would take the load to zero within ", rows, " rows");
  TimeTable t;
  t.names = {"bytes_in", "bytes_out", "flows"};
  t.rows = rows;
  t.cols = 3;
  t.values.reserve(size_t(rows) * 3);
  SplitMix64 rng{seed};
  int64_t burst_left = 0;
  double gain = 1;
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t day = (i / 24) % 7;  // 0 = Monday
    const double weekly = day == 5 ? 0.72 : day == 6 ? 0.68 : 1.0;
    const double load = daily_profile(i % 24) * weekly * (1.0 + options.trend * double(i) / (24.0 * 365.0));
    if (rng.uniform() < options.burst_rate && burst_left == 0) {
      burst_left = 1 + int64_t(rng.next() % 6);
      gain = 1.5 + 1.5 * rng.uniform();  // strong enough to see, weak enough to keep the daily cycle
    }
    const double g = burst_left > 0 ? gain - 1.0 : 0.0;
    if (burst_left > 0) --burst_left;
    const double n1 = rng.normal(), n2 = rng.normal(), n3 = rng.normal();
    t.values.push_back(std::round(4e8 * load * (1.0 + g) * std::exp(options.noise * n1)));
    t.values.push_back(std::round(1.2e8 * load * (1.0 + g / 2) * std::exp(options.noise * n2)));
    t.values.push_back(std::round(2e4 * std::pow(load, 0.8) * (1.0 + g / 4) * std::exp(options.noise * n3)));
  }
  return t;
}

}  // namespace kiln
