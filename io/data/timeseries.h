// Time series for recurrent forecasting (LSTM/GRU): a table of numbers read from CSV or .npy (or
// generated: synthetic_traffic), sliding windows over a row range as a Dataset, per-column
// normalisation from the training rows only, and a split by time into train / val / test.
//   build/tests/kiln_tests_io --source-file='*test_timeseries.cpp'   (ctest -R io.test_timeseries)
//
// Rows are time steps in file order (row 0 first), columns are variables. Nothing here is
// shuffled: a split by time keeps every future row out of training, and every window lies inside
// one split. All functions are pure or read-only after construction; a TimeSeriesDataset may be
// read from several threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/data/dataset.h"

namespace kiln {

// rows x cols float64 values, row-major (values[r * cols + c]); every value finite.
struct TimeTable {
  std::vector<std::string> names;  // one per column: the CSV header, else "c0", "c1", ...
  int64_t rows = 0, cols = 0;
  std::vector<double> values;
  std::string source;  // the file it came from; empty for a generated table

  double at(int64_t row, int64_t col) const { return values[size_t(row * cols + col)]; }
  // A column by name, or else by its 0-based index written in decimal ("2"); kiln::Error naming
  // the known columns when it is neither.
  int64_t column(const std::string& name_or_index) const;
  // source's file name, or "generated" when source is empty: for messages.
  std::string label() const;
};

// Refuse absurd inputs before allocating for them: at most this many values in a table.
constexpr int64_t kMaxTableValues = int64_t(1) << 31;

struct CsvOptions {
  char separator = ',';  // ',', ';' or '\t'
  // File size limit (bytes): the file is read whole, so memory is this plus 8 bytes per value.
  uint64_t max_bytes = uint64_t(4) << 30;
  int64_t max_values = kMaxTableValues;
};

// A CSV of numbers, one time step per line. The first line is a header when any of its fields is
// not a number (NaN and inf count as numbers there, so that a first data row holding one is
// refused as below rather than read as names); without one the names are "c0", "c1", ...
// Fields are trimmed of spaces (and tabs unless tab is the separator) and of one pair of
// surrounding double quotes; quoted separators are not supported. CRLF and a UTF-8 byte-order
// mark are accepted; empty lines at the end are ignored, anywhere else they are an error (a gap
// in a time series is not a missing line to skip). Numbers parse with std::from_chars (no locale).
// kiln::Error naming the file, the 1-based line and 1-based column for: a row with another field
// count than the first line ("line 4 has 3 fields, the header has 4"), an empty field, a field
// that is not a number, NaN, inf, or a value out of float64 range; also for an empty file, a
// header without rows, duplicate header names, a file over max_bytes or a table over max_values.
TimeTable read_csv_table(const std::string& path, const CsvOptions& options = {});

// A .npy (io/formats/npy.h): 1-d (one column) or 2-d (rows x cols) of float32, float64, int32,
// int64 or uint8. Names "c0", "c1", ...; NaN or inf is an error naming the row and column (1-based).
TimeTable read_npy_table(const std::string& path);

// The table as CSV: a header of the names, then one line per row, values in the shortest form
// that reads back to the same double (std::to_chars). Written to a temporary file in the same
// directory, then renamed over `path` (io::write_file_atomic). Names holding a separator, quote or
// line break are refused.
void write_csv_table(const std::string& path, const TimeTable& table, char separator = ',');

struct TimeSeriesOptions {
  int64_t window = 24;  // input length in rows (24: one day of hourly samples)
  int64_t horizon = 1;  // the target is the row `horizon` steps after the window's last row
  int64_t stride = 1;   // rows between the starts of consecutive windows
  // Columns by name or 0-based index ("bytes_in", "2"); empty: all columns, in table order.
  std::vector<std::string> inputs, targets;
  bool normalise = true;  // (x - mean) / std per column, with NormStats of the training rows
};

// Per-column mean and population standard deviation (divide by n, as sklearn's StandardScaler),
// one entry per table column. A std of 0 (a constant column; in practice below 1e-12 x |mean|,
// what rounding of the mean leaves) is stored as 1, so normalising subtracts the mean only.
// Empty vectors mean "no normalisation": both helpers are identities.
struct NormStats {
  std::vector<double> mean, std;

  bool empty() const { return mean.empty(); }
  double normalise(double value, int64_t column) const;
  double denormalise(double value, int64_t column) const;
  // Elementwise over a tensor whose last dim runs over `columns` (table column indices), e.g.
  // predictions [batch, n_targets] with TimeSeriesDataset::target_columns(): a new contiguous
  // tensor of the same shape and dtype (floating point only), on the host.
  Tensor normalise(const Tensor& values, const std::vector<int64_t>& columns) const;
  Tensor denormalise(const Tensor& values, const std::vector<int64_t>& columns) const;
};

// Statistics of rows [begin, end) of `table` (non-empty range), in double with two passes.
NormStats compute_norm_stats(const TimeTable& table, int64_t begin, int64_t end);

// Sliding windows over rows [begin, end) of a shared table. With t = begin + i * stride, example i
// is input float32 [window, n_inputs] = rows t .. t+window-1 of the input columns, and target
// float32 [n_targets] = row t+window-1+horizon of the target columns: one row even when horizon
// > 1 (direct multi-step forecasting, not a sequence of the next `horizon` rows). Values are
// normalised with `stats` when options.normalise; empty stats then mean the statistics of this
// range itself (a lone data set; splits pass the training split's). Every window and target lies
// inside [begin, end). `split` names the range in messages ("training split"); a range shorter
// than window + horizon rows is an error ("a window of 6 steps and horizon 1 needs 7 rows, the
// training split has 5 (file traffic.csv)").
class TimeSeriesDataset : public Dataset {
 public:
  TimeSeriesDataset(std::shared_ptr<const TimeTable> table, int64_t begin, int64_t end,
                    const TimeSeriesOptions& options, NormStats stats = {},
                    std::string split = "data set");
  int64_t size() const override { return size_; }
  Example get(int64_t index) const override;
  Shape sample_shape() const override { return {options_.window, int64_t(inputs_.size())}; }
  // "traffic.csv: rows 10-15 -> row 16" (0-based table rows).
  std::string source(int64_t index) const override;

  // First input row of example `index` (t above) and its target row.
  int64_t first_row(int64_t index) const;
  int64_t target_row(int64_t index) const { return first_row(index) + options_.window - 1 + options_.horizon; }
  const TimeTable& table() const { return *table_; }
  int64_t begin() const { return begin_; }
  int64_t end() const { return end_; }
  const TimeSeriesOptions& options() const { return options_; }
  // The statistics applied (empty when options().normalise is false).
  const NormStats& stats() const { return stats_; }
  const std::vector<int64_t>& input_columns() const { return inputs_; }
  const std::vector<int64_t>& target_columns() const { return targets_; }
  // Predictions [..., n_targets] in normalised units back to the table's units.
  Tensor denormalise_targets(const Tensor& predictions) const {
    return stats_.denormalise(predictions, targets_);
  }

 private:
  std::shared_ptr<const TimeTable> table_;
  int64_t begin_, end_, size_ = 0;
  TimeSeriesOptions options_;
  NormStats stats_;
  std::string split_;
  std::vector<int64_t> inputs_, targets_;
};

// Consecutive row ranges: train [0, train_rows), val [train_rows, val_end), test [val_end, rows),
// with train_rows = floor(train_fraction * rows), val_end = train_rows + floor(val_fraction *
// rows). val is null when val_fraction is 0 and test is null when no rows are left for it; a
// split that has rows but fewer than window + horizon is an error naming it. stats are those of
// the training rows, used by all three (empty when options.normalise is false).
struct TimeSeriesSplits {
  std::shared_ptr<const TimeTable> table;
  std::shared_ptr<TimeSeriesDataset> train, val, test;
  NormStats stats;
  int64_t train_end = 0, val_end = 0;  // row boundaries
};
TimeSeriesSplits split_by_time(std::shared_ptr<const TimeTable> table, const TimeSeriesOptions& options,
                               double train_fraction, double val_fraction);
TimeSeriesSplits split_by_time(TimeTable table, const TimeSeriesOptions& options, double train_fraction,
                               double val_fraction);

// The naive forecast a model must beat: every target predicted as its column's value at the
// window's last step ("persistence", the last value). Mean squared and mean absolute error over
// every target value of `data`, in its normalised units (as the model's loss); kiln::Error when a
// target column is not among the inputs.
struct ForecastScores {
  double mse = 0, mae = 0;
  int64_t samples = 0;
};
ForecastScores last_value_forecast(const TimeSeriesDataset& data);

struct SyntheticTrafficOptions {
  double noise = 0.05;       // relative standard deviation of the per-hour noise
  double trend = 0.3;        // relative growth per 365 days (linear)
  double burst_rate = 0.01;  // probability per hour that a burst starts (bursts last 1-6 hours)
};

// A traffic-like hourly series: row i is hour i after Monday 00:00. Columns:
//   bytes_in   bytes received per hour (about 4e8 mean): a daily cycle (low at 04:00, peak near
//              20:00), weekends at about 70 %, a slow linear trend, multiplicative noise, and
//              bursts that multiply it by 1.5-3;
//   bytes_out  bytes sent per hour (about 1.2e8 mean): the same load, its own noise, bursts at
//              half strength;
//   flows      flow records per hour (about 2e4): load^0.8, its own noise, bursts at a quarter.
// Values are rounded to integers, all positive and finite. A pure function of (seed, options) for
// each row: a private splitmix64 stream (never the global RNG), so a longer series with the same
// seed extends a shorter one.
TimeTable synthetic_traffic(int64_t rows, uint64_t seed, const SyntheticTrafficOptions& options = {});

}  // namespace kiln
