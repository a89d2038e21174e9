// Time-series tables and windows (io/data/timeseries.h): CSV and .npy readers with every refusal
// naming file, line and column; window / horizon / stride values on ramp tables; splits by time
// with statistics from the training rows only; the synthetic traffic series (determinism, daily
// period, weekly dip).
//   build/tests/kiln_tests_io --source-file='*test_timeseries.cpp'   (ctest -R io.test_timeseries)
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "io/data/timeseries.h"
#include "tests/support/testing.h"

namespace kiln {
namespace {

using Bytes = std::vector<uint8_t>;

std::string temp_dir() {
  static test::TempDir dir("timeseries");
  return dir.path.string();
}

std::string write_text(const std::string& name, const std::string& text) {
  std::string path = temp_dir() + "/" + name;
  std::ofstream f(path, std::ios::binary);
  f.write(text.data(), std::streamsize(text.size()));
  return path;
}

// A .npy v1.0 file: magic, version, header length, the dict padded to 64 bytes, the data.
std::string write_npy(const std::string& name, const std::string& descr, const std::string& shape, const void* data,
                      size_t nbytes) {
  std::string h = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + h.size() + 1) % 64) h += ' ';
  h += '\n';
  std::string b = "\x93NUMPY";
  b += char(1);
  b += char(0);
  b += char(h.size() & 0xff);
  b += char(h.size() >> 8);
  b += h;
  b.append(static_cast<const char*>(data), nbytes);
  return write_text(name, b);
}

// rows x 2: column "a" = r, column "b" = r * r.
TimeTable ramp_table(int64_t rows, const std::string& source = "") {
  TimeTable t;
  t.names = {"a", "b"};
  t.rows = rows;
  t.cols = 2;
  for (int64_t r = 0; r < rows; ++r) {
    t.values.push_back(double(r));
    t.values.push_back(double(r * r));
  }
  t.source = source;
  return t;
}

std::vector<double> column_of(const TimeTable& t, int64_t c) {
  std::vector<double> v;
  for (int64_t r = 0; r < t.rows; ++r) v.push_back(t.at(r, c));
  return v;
}

double autocorrelation(const std::vector<double>& x, size_t lag) {
  double mean = 0;
  for (double v : x) mean += v;
  mean /= double(x.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    den += (x[i] - mean) * (x[i] - mean);
    if (i + lag < x.size()) num += (x[i] - mean) * (x[i + lag] - mean);
  }
  return num / den;
}

TEST_CASE("read_csv_table: header detection, values, separators") {
  TimeTable t = read_csv_table(write_text("h.csv", "time, a,\"b\"\n0,1.5,-2\n1,2e3,+4\n\n\n"));
  CHECK(t.names == std::vector<std::string>{"time", "a", "b"});
  CHECK(t.rows == 2);
  CHECK(t.cols == 3);
  CHECK(t.values == std::vector<double>{0, 1.5, -2, 1, 2000, 4});
  CHECK(t.source == temp_dir() + "/h.csv");
  CHECK(t.column("b") == 2);
  CHECK(t.column("1") == 1);
  CHECK_THROWS_KILN(t.column("c"), "h.csv: no column 'c' (columns: time, a, b)");
  CHECK_THROWS_KILN(t.column("3"), "h.csv: column index 3 out of range: the table has 3 columns");

  // No header: every field of line 1 is a number.
  t = read_csv_table(write_text("nohead.csv", "1,2\n3,4.25\n"));
  CHECK(t.names == std::vector<std::string>{"c0", "c1"});
  CHECK(t.values == std::vector<double>{1, 2, 3, 4.25});

  // One non-number field is enough for a header.
  t = read_csv_table(write_text("onename.csv", "1,x\n3,4\n"));
  CHECK(t.names == std::vector<std::string>{"1", "x"});
  CHECK(t.rows == 1);

  CsvOptions semi;
  semi.separator = ';';
  t = read_csv_table(write_text("semi.csv", "a;b\n1.5;2\n"), semi);
  CHECK(t.names == std::vector<std::string>{"a", "b"});
  CHECK(t.values == std::vector<double>{1.5, 2});
  // No locale: a decimal comma is not a number.
  CHECK_THROWS_KILN(read_csv_table(write_text("comma.csv", "a;b\n1,5;2\n"), semi),
                    "comma.csv: line 2, column 1 (a): '1,5' is not a number");
  // Read with the default comma, the same file is one column named "a;b".
  CHECK_THROWS_KILN(read_csv_table(write_text("semi2.csv", "a;b\n1;2\n")),
                    "semi2.csv: line 2, column 1 (a;b): '1;2' is not a number");
  CsvOptions tab;
  tab.separator = '\t';
  t = read_csv_table(write_text("tab.tsv", "x\ty\n 1\t-0.5\n"), tab);
  CHECK(t.names == std::vector<std::string>{"x", "y"});
  CHECK(t.values == std::vector<double>{1, -0.5});
  CsvOptions bad;
  bad.separator = '|';
  CHECK_THROWS_KILN(read_csv_table(temp_dir() + "/tab.tsv", bad), "separator must be ',', ';' or tab");
}

TEST_CASE("read_csv_table: CRLF and a byte-order mark") {
  TimeTable t = read_csv_table(write_text("crlf.csv", "\xEF\xBB\xBF" "a,b\r\n1,2\r\n3,4\r\n\r\n"));
  CHECK(t.names == std::vector<std::string>{"a", "b"});
  CHECK(t.rows == 2);
  CHECK(t.values == std::vector<double>{1, 2, 3, 4});
}

TEST_CASE("read_csv_table: every refusal names file, line and column") {
  CHECK_THROWS_KILN(read_csv_table(write_text("ragged.csv", "a,b,c\n1,2,3\n4,5\n")),
                    "ragged.csv: line 3 has 2 fields, the header has 3 (column 3 is missing)");
  CHECK_THROWS_KILN(read_csv_table(write_text("ragged2.csv", "1,2\n3,4,5\n")),
                    "ragged2.csv: line 2 has 3 fields, line 1 has 2 (column 3 is extra)");
  CHECK_THROWS_KILN(read_csv_table(write_text("word.csv", "a,b\n1,2\n3,abc\n")),
                    "word.csv: line 3, column 2 (b): 'abc' is not a number");
  CHECK_THROWS_KILN(read_csv_table(write_text("trail.csv", "1,2\n3,4x\n")),
                    "trail.csv: line 2, column 2: '4x' is not a number");
  CHECK_THROWS_KILN(read_csv_table(write_text("nan.csv", "a,b\n1,2\nNaN,4\n")),
                    "nan.csv: line 3, column 1 (a): NaN");
  // A NaN on line 1 makes it a data row, not a header.
  CHECK_THROWS_KILN(read_csv_table(write_text("nan1.csv", "1,nan\n")), "nan1.csv: line 1, column 2: NaN");
  CHECK_THROWS_KILN(read_csv_table(write_text("inf.csv", "a,b\n1,-inf\n")),
                    "inf.csv: line 2, column 2 (b): '-inf' is infinite");
  CHECK_THROWS_KILN(read_csv_table(write_text("huge.csv", "a\n1e999\n")),
                    "huge.csv: line 2, column 1 (a): '1e999' is out of float64 range");
  CHECK_THROWS_KILN(read_csv_table(write_text("hole.csv", "a,b\n1,\n")),
                    "hole.csv: line 2, column 2 (b): empty field");
  CHECK_THROWS_KILN(read_csv_table(write_text("gap.csv", "a\n1\n\n2\n")), "gap.csv: line 3 is empty");
  CHECK_THROWS_KILN(read_csv_table(write_text("empty.csv", "")), "empty.csv: the file is empty");
  CHECK_THROWS_KILN(read_csv_table(write_text("blank.csv", "\r\n\n")), "blank.csv: the file is empty");
  CHECK_THROWS_KILN(read_csv_table(write_text("head.csv", "a,b\n")), "head.csv: a header (line 1) and no data rows");
  CHECK_THROWS_KILN(read_csv_table(write_text("dup.csv", "a,b,a\n1,2,3\n")),
                    "dup.csv: line 1, column 3: the name 'a' is also column 1");
  CHECK_THROWS_KILN(read_csv_table(temp_dir() + "/missing.csv"), "missing.csv: no such file");
  CHECK_THROWS_KILN(read_csv_table(temp_dir()), "not a regular file");

  // Bounds: values and bytes, checked before the table grows past them.
  const std::string six = write_text("six.csv", "a,b\n1,2\n3,4\n5,6\n");
  CsvOptions small;
  small.max_values = 5;
  CHECK_THROWS_KILN(read_csv_table(six, small), "six.csv: line 4: the table passes 5 values");
  small.max_values = 6;
  CHECK(read_csv_table(six, small).rows == 3);
  CsvOptions tiny;
  tiny.max_bytes = 8;
  CHECK_THROWS_KILN(read_csv_table(six, tiny), "six.csv: CSV table is 16 bytes, over the 8");
}

TEST_CASE("read_npy_table: 2-d, 1-d, integers; NaN and bad ranks refused") {
  float f[8] = {1, 2, 3, 4, 5, 6, 7, 8.5f};
  TimeTable t = read_npy_table(write_npy("f4.npy", "<f4", "(4, 2)", f, sizeof f));
  CHECK(t.rows == 4);
  CHECK(t.cols == 2);
  CHECK(t.names == std::vector<std::string>{"c0", "c1"});
  CHECK(t.values == std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8.5});
  CHECK(t.at(3, 1) == 8.5);

  double g[3] = {0.25, -1, 1e10};
  t = read_npy_table(write_npy("f8.npy", "<f8", "(3,)", g, sizeof g));
  CHECK(t.rows == 3);
  CHECK(t.cols == 1);
  CHECK(t.values == std::vector<double>{0.25, -1, 1e10});

  int32_t i4[4] = {7, -8, 9, 10};
  t = read_npy_table(write_npy("i4.npy", "<i4", "(2, 2)", i4, sizeof i4));
  CHECK(t.values == std::vector<double>{7, -8, 9, 10});

  float bad[4] = {1, 2, 3, NAN};
  CHECK_THROWS_KILN(read_npy_table(write_npy("nan.npy", "<f4", "(2, 2)", bad, sizeof bad)),
                    "nan.npy: row 2, column 2: NaN");
  double inf[3] = {1, INFINITY, 2};
  CHECK_THROWS_KILN(read_npy_table(write_npy("inf.npy", "<f8", "(3,)", inf, sizeof inf)),
                    "inf.npy: row 2, column 1: inf");
  CHECK_THROWS_KILN(read_npy_table(write_npy("3d.npy", "<f4", "(2, 2, 2)", f, sizeof f)),
                    "3d.npy: a time-series table needs a 1-d or 2-d array, not [2, 2, 2]");
  CHECK_THROWS_KILN(read_npy_table(write_npy("zero.npy", "<f4", "(0, 2)", f, 0)), "zero.npy: the array");
}

TEST_CASE("write_csv_table: atomic, exact round trip") {
  TimeTable t;
  t.names = {"x", "y"};
  t.rows = 3;
  t.cols = 2;
  t.values = {0.1, -3.25, 1e-300, 123456789012345.0, 2.0 / 3.0, -0.0};
  const std::string path = temp_dir() + "/rt.csv";
  write_csv_table(path, t);
  TimeTable back = read_csv_table(path);
  CHECK(back.names == t.names);
  CHECK(back.values == t.values);
  // Overwrite in place, and no temporary left behind.
  t.values[0] = 42;
  write_csv_table(path, t);
  CHECK(read_csv_table(path).values[0] == 42);
  for (const auto& e : std::filesystem::directory_iterator(temp_dir()))
    CHECK_MESSAGE(e.path().filename().string().find(".tmp") == std::string::npos, e.path());

  write_csv_table(temp_dir() + "/rt.tsv", t, '\t');
  CsvOptions tab;
  tab.separator = '\t';
  CHECK(read_csv_table(temp_dir() + "/rt.tsv", tab).values == t.values);

  TimeTable numeric = t;
  numeric.names = {"x", "1"};
  CHECK_THROWS_KILN(write_csv_table(temp_dir() + "/n.csv", numeric), "column 2: the name '1' cannot be written");
  TimeTable comma = t;
  comma.names = {"x", "a,b"};
  CHECK_THROWS_KILN(write_csv_table(temp_dir() + "/c.csv", comma), "the name 'a,b' cannot be written");
  TimeTable inf = t;
  inf.values[3] = INFINITY;
  CHECK_THROWS_KILN(write_csv_table(temp_dir() + "/i.csv", inf), "row 2, column 2: not finite");
}

TEST_CASE("TimeSeriesDataset: window, horizon and stride on a ramp") {
  auto table = std::make_shared<const TimeTable>(ramp_table(10));
  TimeSeriesOptions o;
  o.window = 3;
  o.horizon = 2;
  o.stride = 2;
  o.normalise = false;
  TimeSeriesDataset d(table, 0, 10, o);
  // Needs window + horizon = 5 rows; starts 0, 2, 4 (start 6 would need row 10).
  CHECK(d.size() == 3);
  CHECK(d.sample_shape() == Shape{3, 2});
  Example e = d.get(1);
  CHECK(e.input.dtype() == DType::float32);
  CHECK(e.input.sizes() == Shape{3, 2});
  CHECK(e.input.to_vector() == std::vector<double>{2, 4, 3, 9, 4, 16});
  CHECK(e.target.sizes() == Shape{2});
  CHECK(e.target.to_vector() == std::vector<double>{6, 36});  // row 2 + 3 - 1 + 2
  CHECK(d.first_row(2) == 4);
  CHECK(d.target_row(2) == 8);
  CHECK(d.get(2).target.to_vector() == std::vector<double>{8, 64});
  CHECK(d.source(1) == "generated: rows 2-4 -> row 6");
  CHECK_THROWS_KILN(d.get(3), "index 3 out of range [0, 3)");
  CHECK_THROWS_KILN(d.get(-1), "index -1 out of range");

  // Columns by name and by index; a sub-range of the table.
  o.inputs = {"b"};
  o.targets = {"0"};
  o.horizon = 1;
  o.stride = 1;
  TimeSeriesDataset s(table, 5, 10, o);
  CHECK(s.size() == 2);  // starts 5 and 6
  CHECK(s.sample_shape() == Shape{3, 1});
  CHECK(s.input_columns() == std::vector<int64_t>{1});
  CHECK(s.target_columns() == std::vector<int64_t>{0});
  CHECK(s.get(0).input.to_vector() == std::vector<double>{25, 36, 49});
  CHECK(s.get(1).target.to_vector() == std::vector<double>{9});
  o.inputs = {"nope"};
  CHECK_THROWS_KILN(TimeSeriesDataset(table, 0, 10, o), "generated: no column 'nope' (columns: a, b)");
  o.inputs = {};
  o.window = 0;
  CHECK_THROWS_KILN(TimeSeriesDataset(table, 0, 10, o), "window 0, horizon 1 and stride 1 must be >= 1");
  o.window = 3;
  CHECK_THROWS_KILN(TimeSeriesDataset(table, 4, 11, o), "rows [4, 11) are outside the table's [0, 10)");
}

TEST_CASE("TimeSeriesDataset: normalised values and denormalised predictions") {
  auto table = std::make_shared<const TimeTable>(ramp_table(4));
  TimeSeriesOptions o;
  o.window = 2;
  TimeSeriesDataset d(table, 0, 4, o);  // no stats given: those of rows [0, 4)
  // a = 0..3: mean 1.5, population variance (2.25 + 0.25 + 0.25 + 2.25) / 4 = 1.25.
  // b = 0, 1, 4, 9: mean 3.5, variance (12.25 + 6.25 + 0.25 + 30.25) / 4 = 12.25, std 3.5.
  REQUIRE(d.stats().mean.size() == 2);
  CHECK(d.stats().mean[0] == doctest::Approx(1.5));
  CHECK(d.stats().std[0] == doctest::Approx(std::sqrt(1.25)));
  CHECK(d.stats().mean[1] == doctest::Approx(3.5));
  CHECK(d.stats().std[1] == doctest::Approx(3.5));
  Example e = d.get(1);  // rows 1, 2 -> row 3
  Tensor want_x = from_vector(std::vector<double>{(1 - 1.5) / std::sqrt(1.25), (1 - 3.5) / 3.5,
                                                  (2 - 1.5) / std::sqrt(1.25), (4 - 3.5) / 3.5},
                              {2, 2}, float32);
  CHECK_CLOSE(e.input, want_x, 1e-6, 1e-6);
  Tensor want_y = from_vector(std::vector<double>{(3 - 1.5) / std::sqrt(1.25), (9 - 3.5) / 3.5}, {2}, float32);
  CHECK_CLOSE(e.target, want_y, 1e-6, 1e-6);
  // Predictions [batch, targets] back in table units.
  Tensor pred = from_vector(std::vector<double>{0, 0, 1, -1}, {2, 2}, float32);
  Tensor back = d.denormalise_targets(pred);
  CHECK(back.dtype() == DType::float32);
  CHECK_CLOSE(back, from_vector(std::vector<double>{1.5, 3.5, 1.5 + std::sqrt(1.25), 0}, {2, 2}, float32), 1e-6, 1e-6);
  CHECK_CLOSE(d.stats().normalise(back, d.target_columns()), pred, 1e-6, 1e-6);
  CHECK(d.stats().denormalise(d.stats().normalise(7.0, 1), 1) == doctest::Approx(7.0));
  CHECK_THROWS_KILN(d.denormalise_targets(from_vector(std::vector<double>{1, 2, 3}, {3}, float32)),
                    "the last dim of [3] must match the 2 columns");

  // A constant column gets std 1: normalising only subtracts the mean.
  TimeTable c;
  c.names = {"k"};
  c.rows = 3;
  c.cols = 1;
  c.values = {0.1, 0.1, 0.1};
  NormStats s = compute_norm_stats(c, 0, 3);
  CHECK(s.std[0] == 1.0);
  CHECK(s.mean[0] == doctest::Approx(0.1));
}

TEST_CASE("split_by_time: consecutive ranges, statistics from the training rows only") {
  TimeSeriesOptions o;
  o.window = 2;
  o.horizon = 1;
  TimeSeriesSplits s = split_by_time(ramp_table(20, "/data/ramp.csv"), o, 0.6, 0.2);
  CHECK(s.train_end == 12);
  CHECK(s.val_end == 16);
  REQUIRE(s.train);
  REQUIRE(s.val);
  REQUIRE(s.test);
  CHECK(s.train->size() == 10);  // 12 rows, 3 per example
  CHECK(s.val->size() == 2);
  CHECK(s.test->size() == 2);
  CHECK(s.train->begin() == 0);
  CHECK(s.val->begin() == 12);
  CHECK(s.test->begin() == 16);
  // No window crosses a boundary, and no future row reaches training.
  CHECK(s.train->target_row(s.train->size() - 1) == 11);
  CHECK(s.val->first_row(0) == 12);
  CHECK(s.val->target_row(s.val->size() - 1) == 15);
  CHECK(s.test->target_row(s.test->size() - 1) == 19);

  // By hand, rows 0..11: a: mean 66 / 12 = 5.5, variance (12^2 - 1) / 12 = 143 / 12.
  // b = r^2: sum 506, sum of r^4 = 39974; mean 506 / 12, variance 39974 / 12 - (506 / 12)^2.
  REQUIRE(s.stats.mean.size() == 2);
  CHECK(s.stats.mean[0] == doctest::Approx(5.5));
  CHECK(s.stats.std[0] == doctest::Approx(std::sqrt(143.0 / 12.0)));
  CHECK(s.stats.mean[1] == doctest::Approx(506.0 / 12.0));
  CHECK(s.stats.std[1] == doctest::Approx(std::sqrt(39974.0 / 12.0 - (506.0 / 12.0) * (506.0 / 12.0))));
  // All three use them (the whole table's mean of a would be 9.5).
  CHECK(s.val->stats().mean == s.stats.mean);
  CHECK(s.test->stats().std == s.stats.std);
  const double a12 = (12 - 5.5) / std::sqrt(143.0 / 12.0);
  CHECK(s.val->get(0).input.at({0, 0}) == doctest::Approx(a12).epsilon(1e-6));
  CHECK(s.test->get(1).target.at({0}) == doctest::Approx((19 - 5.5) / std::sqrt(143.0 / 12.0)).epsilon(1e-6));

  // No validation split; train + val = 1 leaves no test split.
  s = split_by_time(ramp_table(20), o, 0.75, 0);
  CHECK(s.val == nullptr);
  REQUIRE(s.test);
  CHECK(s.test->begin() == 15);
  s = split_by_time(ramp_table(20), o, 0.7, 0.3);
  CHECK(s.val_end == 20);
  CHECK(s.val->end() == 20);
  CHECK(s.test == nullptr);

  o.normalise = false;
  s = split_by_time(ramp_table(20), o, 0.6, 0.2);
  CHECK(s.stats.empty());
  CHECK(s.val->get(0).input.at({0, 0}) == 12);

  CHECK_THROWS_KILN(split_by_time(ramp_table(20), o, 0.8, 0.3), "with a sum of at most 1");
  CHECK_THROWS_KILN(split_by_time(ramp_table(20), o, 0, 0.3), "must be in (0, 1]");
  CHECK_THROWS_KILN(split_by_time(ramp_table(20), o, NAN, 0.3), "must be in (0, 1]");
}

TEST_CASE("split_by_time: a window longer than a split is an error naming it") {
  TimeSeriesOptions o;
  o.window = 6;
  o.horizon = 1;
  CHECK_THROWS_KILN(split_by_time(ramp_table(10, "/data/ramp.csv"), o, 0.5, 0.5),
                    "a window of 6 steps and horizon 1 needs 7 rows, the training split has 5 (file ramp.csv)");
  CHECK_THROWS_KILN(split_by_time(ramp_table(20, "/data/ramp.csv"), o, 0.6, 0.2),
                    "a window of 6 steps and horizon 1 needs 7 rows, the validation split has 4 (file ramp.csv)");
  CHECK_THROWS_KILN(split_by_time(ramp_table(40, "/data/ramp.csv"), o, 0.6, 0.3),
                    "needs 7 rows, the test split has 4 (file ramp.csv)");
  o.horizon = 3;
  CHECK_THROWS_KILN(TimeSeriesDataset(std::make_shared<const TimeTable>(ramp_table(8)), 0, 8, o),
                    "a window of 6 steps and horizon 3 needs 9 rows, the data set has 8 (file generated)");
}

TEST_CASE("synthetic_traffic: deterministic, daily period, weekly dip, finite") {
  const int64_t rows = 24 * 7 * 8;
  TimeTable a = synthetic_traffic(rows, 42);
  TimeTable b = synthetic_traffic(rows, 42);
  TimeTable c = synthetic_traffic(rows, 43);
  CHECK(a.names == std::vector<std::string>{"bytes_in", "bytes_out", "flows"});
  CHECK(a.rows == rows);
  CHECK(a.cols == 3);
  CHECK(a.values.size() == size_t(rows * 3));
  CHECK(a.values == b.values);
  CHECK(a.values != c.values);
  CHECK(a.source.empty());
  for (double v : a.values) {
    REQUIRE(std::isfinite(v));
    REQUIRE(v > 0);
    REQUIRE(v == std::round(v));
  }
  for (int64_t col = 0; col < 3; ++col) {
    const std::vector<double> x = column_of(a, col);
    const double r24 = autocorrelation(x, 24), r12 = autocorrelation(x, 12);
    INFO("column ", a.names[size_t(col)], ": lag 24 ", r24, ", lag 12 ", r12);
    CHECK(r24 > 0.45);
    CHECK(r24 > r12 + 0.6);
  }
  // Weekends (days 5, 6 of each week) carry clearly less than weekdays.
  double weekday = 0, weekend = 0;
  for (int64_t r = 0; r < rows; ++r) ((r / 24) % 7 >= 5 ? weekend : weekday) += a.at(r, 0);
  CHECK(weekend / 2 < 0.85 * (weekday / 5));
  // A prefix of a longer series is the shorter series.
  TimeTable shorter = synthetic_traffic(100, 42);
  CHECK(std::equal(shorter.values.begin(), shorter.values.end(), a.values.begin()));
  // Without noise or bursts the series is the smooth profile: 20:00 peaks, 04:00 is the low.
  SyntheticTrafficOptions smooth;
  smooth.noise = 0;
  smooth.burst_rate = 0;
  TimeTable p = synthetic_traffic(24, 1, smooth);
  CHECK(p.at(20, 0) > 4 * p.at(4, 0));
  // 1 + 0.55 cos(2 pi 2/24) + 0.2 cos(2 pi/12) at 20:00 of day 0 (trend 0: no growth).
  smooth.trend = 0;
  p = synthetic_traffic(24, 1, smooth);
  CHECK(p.at(20, 0) == doctest::Approx(4e8 * (1 + 0.75 * std::cos(std::acos(-1.0) / 6))).epsilon(1e-8));
  // And it goes through the CSV writer and reader unchanged.
  write_csv_table(temp_dir() + "/traffic.csv", a);
  TimeTable back = read_csv_table(temp_dir() + "/traffic.csv");
  CHECK(back.values == a.values);
  CHECK(back.names == a.names);

  CHECK_THROWS_KILN(synthetic_traffic(0, 1), "rows 0 must be in [1, ");
  SyntheticTrafficOptions bad;
  bad.noise = -1;
  CHECK_THROWS_KILN(synthetic_traffic(10, 1, bad), "noise -1 must be in [0, 1]");
}

}  // namespace
}  // namespace kiln
