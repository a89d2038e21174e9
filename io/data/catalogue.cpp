// The data-set catalogue, the shared data directory, fetch (copy, resume, verify, rename) and
// verify; see io/data/catalogue.h.
//   ctest --test-dir build -R io.test_catalogue
#include "io/data/catalogue.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "io/data/tar_members.h"
#include "io/formats/digest.h"
#include "io/formats/file_bytes.h"
#include "io/formats/json_limits.h"

extern char** environ;

namespace kiln {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// Checksums as their publishers list them (the Fashion-MNIST README, torchvision's dataset
// classes, the CIFAR page). content_* of Fashion-MNIST: the decompressed IDX files, computed from
// Debian's dataset-fashion-mnist package, whose .gz files carry no original file name in their
// gzip header and so differ from upstream's.
const char* kBuiltin = R"json({"datasets": [
{"name": "mnist", "description": "handwritten digits, 28x28 grey, 60,000 train + 10,000 test, 10 classes",
 "size": "11 MB", "licence": "CC BY-SA 3.0",
 "citation": "Y. LeCun, L. Bottou, Y. Bengio, P. Haffner. Gradient-based learning applied to document recognition. Proc. IEEE 86(11):2278-2324, 1998.",
 "homepage": "http://yann.lecun.com/exdb/mnist/",
 "files": [
  {"name": "train-images-idx3-ubyte.gz", "url": "https://ossci-datasets.s3.amazonaws.com/mnist/train-images-idx3-ubyte.gz", "bytes": 9912422, "md5": "f68b3c2dcbeaaa9fbdd348bbdeb94873"},
  {"name": "train-labels-idx1-ubyte.gz", "url": "https://ossci-datasets.s3.amazonaws.com/mnist/train-labels-idx1-ubyte.gz", "bytes": 28881, "md5": "d53e105ee54ea40749a09fcbcd1e9432"},
  {"name": "t10k-images-idx3-ubyte.gz", "url": "https://ossci-datasets.s3.amazonaws.com/mnist/t10k-images-idx3-ubyte.gz", "bytes": 1648877, "md5": "9fb629c4189551a2d022fa330f9573f3"},
  {"name": "t10k-labels-idx1-ubyte.gz", "url": "https://ossci-datasets.s3.amazonaws.com/mnist/t10k-labels-idx1-ubyte.gz", "bytes": 4542, "md5": "ec29112dd5afa0611ce80d1b7f02629c"}]},
{"name": "fashion-mnist", "description": "Zalando article images, 28x28 grey, 60,000 train + 10,000 test, 10 classes",
 "size": "30 MB", "licence": "MIT",
 "citation": "H. Xiao, K. Rasul, R. Vollgraf. Fashion-MNIST: a Novel Image Dataset for Benchmarking Machine Learning Algorithms. arXiv:1708.07747, 2017.",
 "homepage": "https://github.com/zalandoresearch/fashion-mnist",
 "files": [
  {"name": "train-images-idx3-ubyte.gz", "url": "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/train-images-idx3-ubyte.gz", "bytes": 26421880, "md5": "8d4fb7e6c68d591d4c3dfef9ec88bf0d", "content_md5": "f4a8712d7a061bf5bd6d2ca38dc4d50a", "content_sha256": "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888"},
  {"name": "train-labels-idx1-ubyte.gz", "url": "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/train-labels-idx1-ubyte.gz", "bytes": 29515, "md5": "25c81989df183df01b3e8a0aad5dffbe", "content_md5": "9018921c3c673c538a1fc5bad174d6f9", "content_sha256": "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9"},
  {"name": "t10k-images-idx3-ubyte.gz", "url": "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/t10k-images-idx3-ubyte.gz", "bytes": 4422102, "md5": "bef4ecab320f06d8554ea6380940ec79", "content_md5": "8181f5470baa50b63fa0f6fddb340f0a", "content_sha256": "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b"},
  {"name": "t10k-labels-idx1-ubyte.gz", "url": "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/t10k-labels-idx1-ubyte.gz", "bytes": 5148, "md5": "bb300cfdad3c16e7a12a480ee83cd310", "content_md5": "15d484375f8d13e6eb1aabb0c3f46965", "content_sha256": "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34"}]},
{"name": "cifar-10", "description": "tiny colour images, 32x32 RGB, 50,000 train + 10,000 test, 10 classes (binary version)",
 "size": "163 MB", "licence": "no licence stated; cite the technical report",
 "citation": "A. Krizhevsky. Learning Multiple Layers of Features from Tiny Images. Technical report, University of Toronto, 2009.",
 "homepage": "https://www.cs.toronto.edu/~kriz/cifar.html", "extract": "cifar-10-binary.tar.gz", "data_subdir": "cifar-10-batches-bin",
 "files": [
  {"name": "cifar-10-binary.tar.gz", "url": "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz", "bytes": 170052171, "md5": "c32a1d4ab5d03f1284b67883e8d87530"}]},
{"name": "cifar-100", "description": "tiny colour images, 32x32 RGB, 50,000 train + 10,000 test, 100 classes in 20 superclasses (binary version)",
 "size": "161 MB", "licence": "no licence stated; cite the technical report",
 "citation": "A. Krizhevsky. Learning Multiple Layers of Features from Tiny Images. Technical report, University of Toronto, 2009.",
 "homepage": "https://www.cs.toronto.edu/~kriz/cifar.html", "extract": "cifar-100-binary.tar.gz", "data_subdir": "cifar-100-binary",
 "files": [
  {"name": "cifar-100-binary.tar.gz", "url": "https://www.cs.toronto.edu/~kriz/cifar-100-binary.tar.gz", "bytes": 168513733, "md5": "03b5dce01913d631647c71ecec9e9cb8"}]},
{"name": "imagenet-ilsvrc2012", "description": "ImageNet ILSVRC2012 classification: 1.28 M train + 50,000 val JPEG images, 1,000 classes",
 "size": "144 GB", "licence": "ImageNet terms of access: non-commercial research and education, registration required",
 "citation": "O. Russakovsky et al. ImageNet Large Scale Visual Recognition Challenge. IJCV 115(3):211-252, 2015.",
 "homepage": "https://image-net.org/challenges/LSVRC/2012/", "manual": true,
 "manual_note": "ImageNet's licence requires each user to register and accept its terms at https://image-net.org/download.php, so kiln cannot download it. Download ILSVRC2012_img_train.tar, ILSVRC2012_img_val.tar and ILSVRC2012_devkit_t12.tar.gz there, then run: kiln data fetch imagenet-ilsvrc2012 --from /path/to/the/download/folder",
 "files": [
  {"name": "ILSVRC2012_img_train.tar", "url": "", "bytes": 147897477120, "md5": "1d675b47d978889d74fa0da5fadfb00e"},
  {"name": "ILSVRC2012_img_val.tar", "url": "", "bytes": 6744924160, "md5": "29b22e2961454d5413ddabcf34fc5622"},
  {"name": "ILSVRC2012_devkit_t12.tar.gz", "url": "", "bytes": 2568145, "md5": "fa75699e90414af021442c21a62c3abf"}]}
]})json";

constexpr int64_t kHashLimit = int64_t(4) << 30;  // larger files: size only unless asked

// A name that is one path component of plain characters: a data set's folder under the data
// root, or a file in it. Nothing a catalogue holds may reach outside that folder.
bool safe_component(const std::string& s) {
  if (s.empty() || s.size() > 255 || s == "." || s == ".." || s[0] == '-') return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' || c == '+')) return false;
  return true;
}

// A relative path of safe components ("a/b"): no "..", not absolute.
bool safe_relative(const std::string& s) {
  if (s.empty()) return false;
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, '/'))
    if (!safe_component(part)) return false;
  return s.back() != '/';
}



DatasetInfo parse_entry(const Json& e, const std::string& where) {
  KILN_CHECK(e.is_object() && e.contains("name") && e["name"].is_string(), where, ": an entry has no \"name\"");
  DatasetInfo d;
  d.name = e["name"].get<std::string>();
  KILN_CHECK(safe_component(d.name), where, ": data set name '", d.name,
             "' must be one folder name of letters, digits and . _ - + (no '/', no '..')");
  auto str = [&](const Json& o, const char* k) {
    if (!o.contains(k) || o[k].is_null()) return std::string();
    KILN_CHECK(o[k].is_string(), where, ": data set '", d.name, "': \"", k, "\" must be a string");
    return o[k].get<std::string>();
  };
  d.description = str(e, "description");
  d.size = str(e, "size");
  d.licence = str(e, "licence");
  d.citation = str(e, "citation");
  d.homepage = str(e, "homepage");
  if (e.contains("manual")) {
    KILN_CHECK(e["manual"].is_boolean(), where, ": data set '", d.name, "': \"manual\" is ", io::clip_json(e["manual"]),
               ", not true or false");
    d.manual = e["manual"].get<bool>();
  }
  d.manual_note = str(e, "manual_note");
  d.extract = str(e, "extract");
  d.data_subdir = str(e, "data_subdir");
  KILN_CHECK(e.contains("files") && e["files"].is_array(), where, ": data set '", d.name, "' has no \"files\" list");
  for (const Json& f : e["files"]) {
    KILN_CHECK(f.is_object(), where, ": data set '", d.name, "': each file must be an object");
    DataFile df;
    df.name = str(f, "name");
    KILN_CHECK(safe_component(df.name), where, ": data set '", d.name, "': bad file name '", df.name,
               "' (one name of letters, digits and . _ - +; no '/', no '..')");
    df.url = str(f, "url");
    // curl fetches it: http(s) only (no file://, no argument curl would read as an option).
    KILN_CHECK(df.url.empty() || df.url.rfind("http://", 0) == 0 || df.url.rfind("https://", 0) == 0, where,
               ": data set '", d.name, "': '", df.name, "': \"url\" '", df.url, "' is not http:// or https://");
    if (f.contains("bytes")) {
      KILN_CHECK(f["bytes"].is_number_integer() && f["bytes"].get<int64_t>() >= 0, where, ": '", df.name,
                 "': \"bytes\" is ", io::clip_json(f["bytes"]), ", not an integer >= 0");
      df.bytes = f["bytes"].get<int64_t>();
    }
    df.md5 = str(f, "md5");
    df.sha256 = str(f, "sha256");
    df.content_md5 = str(f, "content_md5");
    df.content_sha256 = str(f, "content_sha256");
    for (const auto& [key, sum, len] : {std::tuple<const char*, std::string, size_t>{"md5", df.md5, 32},
                                        {"sha256", df.sha256, 64},
                                        {"content_md5", df.content_md5, 32},
                                        {"content_sha256", df.content_sha256, 64}})
      KILN_CHECK(sum.empty() || io::is_hex_digits(sum, len), where, ": '", df.name, "': \"", key, "\" '", sum, "' is not ", len,
                 " hex digits");
    for (const DataFile& other : d.files)
      KILN_CHECK(other.name != df.name, where, ": data set '", d.name, "' lists '", df.name, "' twice");
    d.files.push_back(df);
  }
  // The archive to unpack must be one of the entry's own files, fetched and verified with them.
  if (!d.extract.empty()) {
    bool listed = false;
    for (const DataFile& f : d.files) listed |= f.name == d.extract;
    KILN_CHECK(listed, where, ": data set '", d.name, "': \"extract\" '", d.extract,
               "' is not one of its files");
  }
  KILN_CHECK(d.data_subdir.empty() || safe_relative(d.data_subdir), where, ": data set '", d.name,
             "': \"data_subdir\" '", d.data_subdir, "' must be a relative path inside the data set (no '..')");
  return d;
}

std::vector<DatasetInfo> parse_catalogue(const std::string& text, const std::string& where) {
  io::check_json_depth(text, where);
  Json j = Json::parse(text, nullptr, false);
  KILN_CHECK(!j.is_discarded(), where, ": not valid JSON");
  KILN_CHECK(j.is_object() && j.contains("datasets") && j["datasets"].is_array(), where,
             ": expected {\"datasets\": [...]}");
  std::vector<DatasetInfo> out;
  for (const Json& e : j["datasets"]) out.push_back(parse_entry(e, where));
  return out;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Runs argv[0] from PATH with no shell (names and URLs are never interpreted); returns the exit code.
int run_program(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid;
  int rc = ::posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ);
  KILN_CHECK(rc == 0, "cannot run '", args[0], "': ", std::strerror(rc));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    KILN_CHECK(errno == EINTR, "waiting for '", args[0], "' failed: ", std::strerror(errno));
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Appends source[from_offset..] to `part` (created if missing).
void copy_rest(const std::string& source, const std::string& part, int64_t from_offset) {
  const io::RegularFile src(source);  // a FIFO or device is refused, naming it, instead of blocking
  const int in = src.fd();
  int out = ::open(part.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (out < 0) {
    int e = errno;
    KILN_THROW("cannot open '", part, "': ", std::strerror(e));
  }
  std::string error;
  if (::lseek(in, from_offset, SEEK_SET) < 0) error = "seek in '" + source + "' failed: " + std::strerror(errno);
  std::vector<char> buf(1 << 20);
  while (error.empty()) {
    ssize_t r = ::read(in, buf.data(), buf.size());
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) { error = "read of '" + source + "' failed: " + std::strerror(errno); break; }
    if (r == 0) break;
    for (ssize_t done = 0; done < r && error.empty();) {
      ssize_t w = ::write(out, buf.data() + done, size_t(r - done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) error = "write to '" + part + "' failed: " + std::strerror(errno);
      else done += w;
    }
  }
  if (error.empty() && ::fsync(out) != 0) error = "fsync of '" + part + "' failed: " + std::strerror(errno);
  ::close(out);
  KILN_CHECK(error.empty(), error);
}

int64_t size_or(const std::string& p, int64_t missing) {
  std::error_code ec;
  auto n = fs::file_size(p, ec);
  return ec ? missing : int64_t(n);
}

bool is_url(const std::string& s) { return s.rfind("http://", 0) == 0 || s.rfind("https://", 0) == 0; }

// Where file `f` of `d` comes from, as a URL or a local path.
std::string source_of(const DatasetInfo& d, const DataFile& f, const std::string& from) {
  if (from.empty()) {
    KILN_CHECK(!d.manual && !f.url.empty(), "data set '", d.name, "' cannot be downloaded automatically: ",
               d.manual_note.empty() ? "its catalogue entry has no URL for '" + f.name + "'; use --from" : d.manual_note);
    return f.url;
  }
  std::string src = from.rfind("file://", 0) == 0 ? from.substr(7) : from;
  if (is_url(src)) {
    if (ends_with(src, "/")) return src + f.name;
    KILN_CHECK(d.files.size() == 1, "--from '", from, "' is one URL but data set '", d.name, "' has ",
               d.files.size(), " files: give the folder URL ending in '/'");
    return src;
  }
  std::error_code ec;
  if (ends_with(src, "/") || fs::is_directory(src, ec)) return (fs::path(src) / f.name).string();
  KILN_CHECK(d.files.size() == 1, "--from '", from, "' is one file but data set '", d.name, "' has ",
             d.files.size(), " files: give the folder that holds them");
  return src;
}

std::string installed_dir(const DatasetInfo* d, const std::string& base) {
  std::error_code ec;
  if (!fs::is_directory(base, ec)) return "";
  if (!d) return base;
  if (!d->data_subdir.empty() && fs::is_directory(fs::path(base) / d->data_subdir, ec))
    return (fs::path(base) / d->data_subdir).string();
  for (const auto& f : d->files)
    if (!fs::exists(fs::path(base) / f.name, ec)) return "";
  return d->data_subdir.empty() ? base : "";  // an archive not yet unpacked is not usable
}

void say(const FetchOptions& opt, const std::string& s) {
  if (opt.log) opt.log(s);
}

}  // namespace

std::vector<DatasetInfo> catalogue() {
  std::vector<DatasetInfo> all = parse_catalogue(kBuiltin, "the built-in catalogue");
  const char* user = std::getenv("KILN_CATALOGUE");
  if (user && *user) {
    std::string text;
    try {
      text = io::read_text_file(user, "catalogue", uint64_t(16) << 20);
    } catch (const Error& e) {
      KILN_THROW("KILN_CATALOGUE '", user, "': cannot open: ", e.message().empty() ? std::string(e.what()) : e.message());
    }
    for (auto& d : parse_catalogue(text, std::string("KILN_CATALOGUE '") + user + "'")) {
      bool replaced = false;
      for (auto& b : all)
        if (b.name == d.name) b = d, replaced = true;
      if (!replaced) all.push_back(d);
    }
  }
  return all;
}

DatasetInfo catalogue_entry(const std::string& name) {
  std::string known;
  for (auto& d : catalogue()) {
    if (d.name == name) return d;
    known += (known.empty() ? "" : ", ") + d.name;
  }
  KILN_THROW("unknown data set '", name, "' (known: ", known, ")");
}

std::string data_root() {
  const char* env = std::getenv("KILN_DATA");
  if (env && *env) return env;
  const char* home = std::getenv("HOME");
  KILN_CHECK(home && *home, "neither KILN_DATA nor HOME is set: cannot place the data directory");
  return (fs::path(home) / ".cache" / "kiln" / "data").string();
}

std::string find_dataset(const std::string& name) {
  if (name.empty() || name.find('/') != std::string::npos) return "";
  std::unique_ptr<DatasetInfo> d;
  for (auto& e : catalogue())
    if (e.name == name) d = std::make_unique<DatasetInfo>(e);
  for (const std::string& base : {(fs::path(data_root()) / name).string(), "/usr/share/datasets/" + name}) {
    std::string dir = installed_dir(d.get(), base);
    if (!dir.empty()) return dir;
  }
  return "";
}

FileCheck check_file(const DataFile& f, const std::string& path, bool full) {
  FileCheck c{f.name, false, ""};
  const int64_t n = size_or(path, -1);
  if (n < 0) {
    c.detail = "missing";
    return c;
  }
  const bool has_hash = !f.md5.empty() || !f.sha256.empty() || !f.content_md5.empty() || !f.content_sha256.empty();
  if (!has_hash || (!full && n > kHashLimit)) {
    if (f.bytes >= 0 && n != f.bytes) {
      c.detail = "size " + std::to_string(n) + " bytes, expected " + std::to_string(f.bytes);
      return c;
    }
    c.ok = true;
    c.detail = !has_hash ? (f.bytes >= 0 ? "size ok (no checksum listed)" : "present (no checksum listed)")
                         : "size ok (" + std::to_string(n) + " bytes; --full hashes it)";
    return c;
  }
  // Every sum the catalogue lists must match (a matching md5 does not excuse a wrong sha256). A
  // .gz copy a distribution recompressed passes instead when every decompressed sum listed matches.
  std::string why, passed;
  bool raw_ok = !f.md5.empty() || !f.sha256.empty();
  for (const auto& [algo, want] : {std::pair<std::string, std::string>{"sha256", f.sha256}, {"md5", f.md5}}) {
    if (want.empty()) continue;
    const std::string got = io::file_digest_hex(algo, path);
    if (got == want) {
      passed += (passed.empty() ? "" : " and ") + algo;
    } else {
      raw_ok = false;
      why += (why.empty() ? "" : "; ") + algo + " " + got + ", expected " + want;
    }
  }
  if (raw_ok) {
    c.ok = true;
    c.detail = passed + " ok";
    return c;
  }
  if ((!f.content_md5.empty() || !f.content_sha256.empty()) && ends_with(f.name, ".gz")) {
    bool content_ok = true;
    std::string content_passed;
    for (const auto& [algo, want] :
         {std::pair<std::string, std::string>{"sha256", f.content_sha256}, {"md5", f.content_md5}}) {
      if (want.empty()) continue;
      std::string got;
      try {
        got = io::gunzip_digest_hex(algo, path);
      } catch (const Error& e) {
        got = "(" + std::string(e.what()) + ")";
      }
      if (got == want) {
        content_passed += (content_passed.empty() ? "" : " and ") + algo;
      } else {
        content_ok = false;
        why += (why.empty() ? "" : "; ") + std::string("decompressed ") + algo + " " + got + ", expected " + want;
      }
    }
    if (content_ok) {
      c.ok = true;
      c.detail = "decompressed " + content_passed + " ok (recompressed copy)";
      return c;
    }
  }
  c.detail = "checksum mismatch: " + why;
  return c;
}

// The data set's folder under the data root, refused when it resolves (through symlinks or
// "..") to somewhere outside it.
std::string dataset_dir(const std::string& name) {
  const fs::path root = fs::path(data_root());
  const fs::path dir = root / name;
  std::error_code ec;
  const fs::path real_root = fs::weakly_canonical(root, ec);
  KILN_CHECK(!ec, "KILN_DATA '", root.string(), "': ", ec.message());
  const fs::path real_dir = fs::weakly_canonical(dir, ec);
  KILN_CHECK(!ec, "'", dir.string(), "': ", ec.message());
  const std::string r = real_root.string(), d = real_dir.string();
  KILN_CHECK(d.size() > r.size() && d.compare(0, r.size(), r) == 0 && (r.back() == '/' || d[r.size()] == '/'),
             "data set '", name, "': its folder '", dir.string(), "' resolves to '", d,
             "', outside the data directory '", r, "' (KILN_DATA)");
  return dir.string();
}

// A leftover <file>.part that is not a plain file (a symlink planted there would have the copy
// or curl write through it) is removed before anything is written to that name.
void clear_odd_part(const std::string& part) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(part, ec);
  if (!ec && fs::exists(st) && !fs::is_regular_file(st)) {
    fs::remove(part, ec);
    KILN_CHECK(!ec, "'", part, "' is not a regular file and cannot be removed: ", ec.message());
  }
}

std::string fetch_dataset(const std::string& name, const FetchOptions& opt) {
  const DatasetInfo d = catalogue_entry(name);
  KILN_CHECK(!(d.manual && opt.from.empty()), "data set '", name, "' cannot be downloaded automatically: ",
             d.manual_note);
  // --dir is the user's own choice; the default folder must stay inside the data root.
  const std::string dir = opt.dir.empty() ? dataset_dir(name) : opt.dir;
  std::error_code ec;
  fs::create_directories(dir, ec);
  KILN_CHECK(!ec, "cannot create '", dir, "': ", ec.message());
  for (const DataFile& f : d.files) {
    const std::string dest = (fs::path(dir) / f.name).string();
    if (fs::exists(dest, ec)) {
      // The archive is hashed whatever its size: it is unpacked next.
      FileCheck c = check_file(f, dest, f.name == d.extract);
      if (c.ok) {
        say(opt, f.name + ": present, " + c.detail);
        continue;
      }
      say(opt, f.name + ": present but " + c.detail + "; fetching again");
    }
    const std::string src = source_of(d, f, opt.from);
    const std::string part = dest + ".part";
    clear_odd_part(part);
    int64_t have = size_or(part, 0);
    if (is_url(src)) {
      say(opt, f.name + ": downloading " + src + (have > 0 ? " (resuming at " + std::to_string(have) + " bytes)" : ""));
      // http(s) only, redirects included: a redirect to file:// or another scheme is refused by curl.
      int rc = run_program({"curl", "--fail", "--location", "--proto", "=http,https", "--proto-redir", "=http,https",
                            "--retry", "3", "--continue-at", "-", "--output", part, "--url", src});
      KILN_CHECK(rc == 0, "download of '", src, "' failed (curl exit code ", rc, "); '", part,
                 "' is kept, and the next fetch resumes it");
    } else {
      const int64_t total = size_or(src, -1);
      KILN_CHECK(total >= 0 || !fs::exists(src, ec), "'", f.name, "' of data set '", name, "': source '", src,
                 "' is not a regular file");
      KILN_CHECK(total >= 0, "'", f.name, "' of data set '", name, "': source '", src, "' does not exist");
      if (have > total) {  // not a prefix of this source: start again
        fs::remove(part, ec);
        have = 0;
      }
      say(opt, f.name + ": copying " + src + (have > 0 ? " (resuming at " + std::to_string(have) + " bytes)" : ""));
      copy_rest(src, part, have);
    }
    FileCheck c = check_file(f, part, true);
    if (!c.ok) {
      fs::remove(part, ec);
      KILN_THROW("'", f.name, "' of data set '", name, "' from '", src, "': ", c.detail,
                 " (the partial file was removed)");
    }
    fs::rename(part, dest, ec);
    KILN_CHECK(!ec, "rename of '", part, "' failed: ", ec.message());
    say(opt, f.name + ": " + c.detail);
  }
  if (!d.extract.empty() && !d.data_subdir.empty() && !fs::is_directory(fs::path(dir) / d.data_subdir, ec)) {
    const std::string archive = (fs::path(dir) / d.extract).string();
    // Every member is checked before tar runs: nothing lands outside `dir` (no absolute names,
    // "..", links out, devices or FIFOs).
    check_tar_members(tar_members(archive), archive);
    say(opt, "unpacking " + d.extract);
    int rc = run_program({"tar", "--no-same-owner", "--no-same-permissions", "-xf", archive, "-C", dir});
    KILN_CHECK(rc == 0, "unpacking '", archive, "' failed (tar exit code ", rc, ")");
  }
  return dir;
}

std::vector<FileCheck> verify_dataset(const std::string& name, const std::string& dir_in, bool full) {
  const DatasetInfo d = catalogue_entry(name);
  std::string dir = dir_in;
  if (dir.empty()) {
    for (const std::string& base : {(fs::path(data_root()) / name).string(), "/usr/share/datasets/" + name})
      if (std::error_code ec; fs::is_directory(base, ec)) {
        dir = base;
        break;
      }
    KILN_CHECK(!dir.empty(), "data set '", name, "' is not installed (looked in ", (fs::path(data_root()) / name).string(),
               " and /usr/share/datasets/", name, "); kiln data fetch ", name);
  }
  std::vector<FileCheck> out;
  for (const DataFile& f : d.files) out.push_back(check_file(f, (fs::path(dir) / f.name).string(), full));
  return out;
}

}  // namespace kiln
