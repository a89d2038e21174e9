// open_dataset_dir. See datasets.h.
#include "io/data/datasets.h"

#include <algorithm>
#include <charconv>
#include <filesystem>

#include "engine/checked_size.h"
#include "io/data/catalogue.h"
#include "io/data/cifar.h"
#include "io/data/idx.h"
#include "io/data/image_folder.h"
#include "io/data/synthetic.h"
#include "io/data/timeseries.h"
#include "io/formats/file_bytes.h"
#include "io/formats/npz.h"

namespace kiln {

namespace {

namespace fs = std::filesystem;

bool path_exists(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

bool path_is_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower((unsigned char)c));
  return s;
}

// The class count of a classification set is its largest label + 1, so the label is checked
// first: a forged 2^62 would otherwise size the classifier layer.
constexpr int64_t kMaxClasses = int64_t(1) << 20;

int64_t label_count(const Tensor& labels, const std::string& path, const char* key) {
  KILN_CHECK(!labels.is_floating_point(), io::base_name(path), ": '", key, "' holds ", dtype_name(labels.dtype()),
             " values; class labels must be integers");
  int64_t mx = -1, i = 0;
  for (int64_t v : labels.to(int64).contiguous().to_vector_of<int64_t>()) {
    KILN_CHECK(v >= 0 && v < kMaxClasses, io::base_name(path), ": label ", v, " of '", key, "' at index ", i,
               " is out of range [0, ", kMaxClasses, ") (class labels are 0, 1, ...; at most 2^20 classes)");
    mx = std::max(mx, v);
    ++i;
  }
  return mx + 1;
}

constexpr int64_t kMaxSyntheticValues = int64_t(1) << 28;
constexpr int64_t kMaxSyntheticSamples = int64_t(1) << 28;

Splits synthetic(const std::string& spec) {
  // synthetic:CxHxW:CLASSES:N[:learnable]
  auto bad = [&] {
    KILN_THROW("open_dataset_dir: bad synthetic spec '", spec, "' (expected synthetic:CxHxW:CLASSES:N[:learnable])");
  };
  std::vector<std::string> parts;
  size_t p = 0;
  while (true) {
    size_t q = spec.find(':', p);
    parts.push_back(spec.substr(p, q == std::string::npos ? q : q - p));
    if (q == std::string::npos) break;
    p = q + 1;
  }
  if (parts.size() != 4 && !(parts.size() == 5 && parts[4] == "learnable")) bad();
  const bool learnable = parts.size() == 5;
  // Whole decimal numbers only: "3x4a" or "1e9" is a bad spec, not 3x4 or 1.
  auto number = [&](const std::string& t) -> int64_t {
    int64_t v = 0;
    auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (t.empty() || ec != std::errc() || end != t.data() + t.size()) bad();
    return v;
  };
  Shape shape;
  {
    size_t s = 0;
    while (s <= parts[1].size()) {
      size_t x = parts[1].find('x', s);
      shape.push_back(number(parts[1].substr(s, x == std::string::npos ? x : x - s)));
      if (x == std::string::npos) break;
      s = x + 1;
    }
    Splits out;
    out.classes = number(parts[2]);
    int64_t n = number(parts[3]);
    if (n <= 0 || out.classes <= 0) bad();
    for (int64_t d : shape) if (d <= 0) bad();
    KILN_CHECK(out.classes <= kMaxClasses, "open_dataset_dir: synthetic spec '", spec, "': ", out.classes,
               " classes, at most ", kMaxClasses);
    // float32 samples: the element count and bytes of one sample must not wrap (engine/checked_size.h),
    // and stay within what a decoded image may hold (2^28 values); the sampler keeps an index per
    // sample, so the count is bounded too. A spec is a flag: it must not ask for terabytes.
    const int64_t values = checked_numel(shape, "open_dataset_dir: synthetic spec '" + spec + "': sample " + parts[1]);
    KILN_CHECK(values <= kMaxSyntheticValues, "open_dataset_dir: synthetic spec '", spec, "': a sample of ", values,
               " values, at most ", kMaxSyntheticValues);
    KILN_CHECK(n <= kMaxSyntheticSamples, "open_dataset_dir: synthetic spec '", spec, "': ", n, " samples, at most ",
               kMaxSyntheticSamples);
    out.train = std::make_shared<SyntheticDataset>(shape, out.classes, n, 0, learnable);
    out.test = std::make_shared<SyntheticDataset>(shape, out.classes, std::max<int64_t>(1, n / 10), 1, learnable);
    out.name = "synthetic";
    out.sample_shape = shape;
    return out;
  }
}

// "timeseries:PATH[:key=value]...": a CSV or .npy table as sliding windows, split by time.
Splits timeseries(const std::string& spec) {
  std::vector<std::string> parts;
  for (size_t a = 0;;) {
    const size_t b = spec.find(':', a);
    parts.push_back(spec.substr(a, b == std::string::npos ? std::string::npos : b - a));
    if (b == std::string::npos) break;
    a = b + 1;
  }
  KILN_CHECK(parts.size() >= 2 && !parts[1].empty(), "--data ", spec,
             ": timeseries:PATH[:window=N][:horizon=N][:stride=N][:inputs=a,b][:targets=c][:train=F][:sep=;]");
  TimeSeriesOptions o;
  o.window = 6;
  double train = 0.8;
  CsvOptions csv;
  auto integer = [&](const std::string& key, const std::string& v) {
    int64_t x = 0;
    const auto r = std::from_chars(v.data(), v.data() + v.size(), x);
    KILN_CHECK(r.ec == std::errc() && r.ptr == v.data() + v.size() && x >= 1 && x <= (int64_t(1) << 31), "--data ",
               spec, ": ", key, "=", v, " is not a positive integer");
    return x;
  };
  auto names = [](const std::string& v) {
    std::vector<std::string> out;
    for (size_t a = 0;;) {
      const size_t b = v.find(',', a);
      out.push_back(v.substr(a, b == std::string::npos ? std::string::npos : b - a));
      if (b == std::string::npos) break;
      a = b + 1;
    }
    return out;
  };
  for (size_t i = 2; i < parts.size(); ++i) {
    const size_t eq = parts[i].find('=');
    KILN_CHECK(eq != std::string::npos, "--data ", spec, ": '", parts[i], "' is not key=value");
    const std::string key = parts[i].substr(0, eq), v = parts[i].substr(eq + 1);
    if (key == "window") o.window = integer(key, v);
    else if (key == "horizon") o.horizon = integer(key, v);
    else if (key == "stride") o.stride = integer(key, v);
    else if (key == "inputs") o.inputs = names(v);
    else if (key == "targets") o.targets = names(v);
    else if (key == "sep") {
      KILN_CHECK(v == "," || v == ";" || v == "tab", "--data ", spec, ": sep is ',', ';' or 'tab', not '", v, "'");
      csv.separator = v == "tab" ? '\t' : v[0];
    } else if (key == "train") {
      char* end = nullptr;
      train = std::strtod(v.c_str(), &end);
      KILN_CHECK(end && *end == 0 && train > 0 && train < 1, "--data ", spec, ": train=", v,
                 " is not a fraction in (0, 1)");
    } else {
      KILN_THROW("--data ", spec, ": unknown key '", key,
                 "' (window, horizon, stride, inputs, targets, train, sep)");
    }
  }
  const std::string path = parts[1], ext = lower(fs::path(path).extension().string());
  KILN_CHECK(ext == ".csv" || ext == ".npy", "--data ", spec, ": ", path, " is neither a .csv nor a .npy file");
  TimeTable table = ext == ".csv" ? read_csv_table(path, csv) : read_npy_table(path);
  TimeSeriesSplits s = split_by_time(std::move(table), o, train, 0.0);
  KILN_CHECK(s.test != nullptr, "--data ", spec, ": no rows are left for the test split after train=", train);
  Splits out;
  out.train = s.train;
  out.test = s.test;
  out.name = "timeseries";
  out.sample_shape = s.train->sample_shape();
  out.classes = int64_t(s.train->target_columns().size());
  out.regression = true;
  return out;
}

Splits npz(const std::string& path) {
  auto arrays = read_npz(path);
  auto get = [&](const std::string& k) -> Tensor {
    for (const auto& [key, t] : arrays) if (key == k) return t;
    return Tensor();
  };
  Splits out;
  out.name = "npz";
  if (get("x_train").defined() && get("y_train").defined() && get("x_test").defined() && get("y_test").defined()) {
    Tensor ytr = npz_targets(get("y_train")), yte = npz_targets(get("y_test"));
    out.train = std::make_shared<TensorDataset>(npz_inputs(get("x_train")), ytr);
    out.test = std::make_shared<TensorDataset>(npz_inputs(get("x_test")), yte);
    out.segmentation = ytr.dim() > 1;
    out.classes = out.segmentation ? ytr.size(1) : label_count(ytr, path, "y_train");
    if (!out.segmentation) out.classes = std::max(out.classes, label_count(yte, path, "y_test"));
  } else if (get("images").defined() && get("masks").defined()) {
    Tensor x = npz_inputs(get("images")), y = npz_targets(get("masks"));
    KILN_CHECK(x.size(0) == y.size(0), io::base_name(path), ": images ", shape_str(x.sizes()), " and masks ",
               shape_str(y.sizes()), " differ in count");
    int64_t n = x.size(0), ntr = n * 9 / 10;
    KILN_CHECK(ntr > 0 && ntr < n, io::base_name(path), ": ", n, " images are too few for a 90/10 split");
    out.train = std::make_shared<TensorDataset>(x.narrow(0, 0, ntr), y.narrow(0, 0, ntr));
    out.test = std::make_shared<TensorDataset>(x.narrow(0, ntr, n - ntr), y.narrow(0, ntr, n - ntr));
    out.segmentation = y.dim() > 1;
    out.classes = out.segmentation ? y.size(1) : label_count(y, path, "masks");
  } else {
    std::string have;
    for (const auto& [k, t] : arrays) have += (have.empty() ? "" : ", ") + k;
    KILN_THROW(io::base_name(path), ": expected arrays x_train/y_train/x_test/y_test or images/masks, has: ", have);
  }
  out.sample_shape = out.train->sample_shape();
  return out;
}

}  // namespace

std::shared_ptr<const Transform> Splits::default_transform(bool train) const {
  if (name == "mnist" || name == "fashion-mnist") {
    float m = name == "mnist" ? 0.1307f : 0.2860f, s = name == "mnist" ? 0.3081f : 0.3530f;
    return compose({to_float(), normalize({m}, {s})});
  }
  if (name == "cifar10" || name == "cifar100") {
    std::vector<float> m = name == "cifar10" ? std::vector<float>{0.4914f, 0.4822f, 0.4465f}
                                             : std::vector<float>{0.5071f, 0.4865f, 0.4409f};
    std::vector<float> s = name == "cifar10" ? std::vector<float>{0.2470f, 0.2435f, 0.2616f}
                                             : std::vector<float>{0.2673f, 0.2564f, 0.2762f};
    if (train) return compose({random_crop(32, 32, 4), random_horizontal_flip(), to_float(), normalize(m, s)});
    return compose({to_float(), normalize(m, s)});
  }
  if (name == "imagenet") {
    auto norm = normalize({0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f});
    if (train) return compose({random_resized_crop(224, 224), random_horizontal_flip(), to_float(), norm});
    return compose({resize_shorter(256), center_crop(224, 224), to_float(), norm});
  }
  return to_float();
}

Splits open_dataset_dir(const std::string& path) {
  if (path.rfind("synthetic:", 0) == 0) return synthetic(path);
  if (path.rfind("timeseries:", 0) == 0) return timeseries(path);
  fs::path p(path);
  KILN_CHECK(path_exists(p), "open_dataset_dir: ", path, " does not exist");
  if (!path_is_dir(p)) {
    KILN_CHECK(lower(p.extension().string()) == ".npz", "open_dataset_dir: ", path,
               " is a file but not a .npz (files: .npz; folders: IDX, CIFAR binary, train/+val/ image tree)");
    return npz(path);
  }
  Splits out;
  auto has = [&](const fs::path& d, const std::string& f) { return path_exists(d / f) || path_exists(d / (f + ".gz")); };
  if (has(p, "train-images-idx3-ubyte") && has(p, "t10k-images-idx3-ubyte")) {
    auto train = std::make_shared<MnistDataset>(path, true);
    out.test = std::make_shared<MnistDataset>(path, false);
    out.name = lower(path).find("fashion") != std::string::npos ? "fashion-mnist" : "mnist";
    out.sample_shape = train->sample_shape();
    out.classes = 10;
    out.train = train;
    return out;
  }
  for (const char* sub : {"", "cifar-10-batches-bin"}) {
    fs::path d = p / sub;
    if (path_exists(d / "data_batch_1.bin") && path_exists(d / "test_batch.bin")) {
      out.train = std::make_shared<CifarDataset>(d.string(), true, CifarKind::cifar10);
      out.test = std::make_shared<CifarDataset>(d.string(), false, CifarKind::cifar10);
      out.name = "cifar10";
      out.sample_shape = {3, 32, 32};
      out.classes = 10;
      return out;
    }
  }
  for (const char* sub : {"", "cifar-100-binary"}) {
    fs::path d = p / sub;
    if (path_exists(d / "train.bin") && path_exists(d / "test.bin")) {
      out.train = std::make_shared<CifarDataset>(d.string(), true, CifarKind::cifar100);
      out.test = std::make_shared<CifarDataset>(d.string(), false, CifarKind::cifar100);
      out.name = "cifar100";
      out.sample_shape = {3, 32, 32};
      out.classes = 100;
      return out;
    }
  }
  if (path_is_dir(p / "train") && path_is_dir(p / "val")) {
    auto train = std::make_shared<ImageFolder>((p / "train").string());
    auto val = std::make_shared<ImageFolder>((p / "val").string());
    KILN_CHECK(train->classes() == val->classes(), "open_dataset_dir: ", path, ": train/ has ", train->classes().size(),
               " classes, val/ has ", val->classes().size(), " (they must be the same folders)");
    out.name = "imagenet";
    out.classes = int64_t(train->classes().size());
    out.sample_shape = {3, 224, 224};  // what default_transform gives; the files vary in size
    out.train = train;
    out.test = val;
    return out;
  }
  KILN_THROW("open_dataset_dir: ", path, " holds no data set kiln recognises; looked for IDX files "
             "(train-images-idx3-ubyte[.gz], t10k-images-idx3-ubyte[.gz]), CIFAR-10 (data_batch_1.bin, test_batch.bin), "
             "CIFAR-100 (train.bin, test.bin), an image tree (train/ and val/ of class folders), a .npz file, or "
             "synthetic:CxHxW:CLASSES:N[:learnable]");
}

Splits open_dataset(const std::string& spec) {
  KILN_CHECK(!spec.empty(), "--data is required (a data set name, a directory or a .npz file)");
  std::error_code ec;  // a name too long for a path, or in a folder we may not read, is not a path here
  if (spec.rfind("synthetic:", 0) == 0 || spec.rfind("timeseries:", 0) == 0 || std::filesystem::exists(spec, ec))
    return open_dataset_dir(spec);
  const std::string dir = find_dataset(spec);
  KILN_CHECK(!dir.empty(), "--data ", spec, ": neither a path nor an installed data set (looked under ", data_root(),
             " and /usr/share/datasets); `kiln data fetch ", spec, "` installs it");
  Splits s = open_dataset_dir(dir);
  s.name = spec;
  return s;
}

}  // namespace kiln
