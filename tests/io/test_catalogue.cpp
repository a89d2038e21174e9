// The data-set catalogue: built-in entries, a user catalogue (KILN_CATALOGUE), fetch from file://
// and paths into a temporary KILN_DATA, resume from a .part file, checksum failures, verify
// detecting one corrupted byte, unpacking an archive. Debian's recompressed Fashion-MNIST:
// test_catalogue_fashion.cpp.
//   ctest --test-dir build -R io.test_catalogue
#include "tests/support/testing.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/data/catalogue.h"
#include "io/formats/digest.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

struct Env {
  fs::path root;
  Env() : root(fs::temp_directory_path() / ("kiln_catalogue_" + std::to_string(::getpid()))) {
    fs::remove_all(root);
    fs::create_directories(root / "src");
    ::setenv("KILN_DATA", (root / "data").c_str(), 1);
    ::unsetenv("KILN_CATALOGUE");
  }
  ~Env() {
    ::unsetenv("KILN_DATA");
    ::unsetenv("KILN_CATALOGUE");
    fs::remove_all(root);
  }
  std::string write(const std::string& rel, const std::string& bytes) const {
    std::ofstream(root / rel, std::ios::binary) << bytes;
    return (root / rel).string();
  }
};

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string pattern(size_t n, int seed) {
  std::string s(n, 0);
  for (size_t i = 0; i < n; ++i) s[i] = char((i * 131 + seed * 7 + (i >> 8)) & 0xff);
  return s;
}

// A user catalogue with data set "tiny" (two files: one by md5, one by sha256) and "one" (one file).
void write_user_catalogue(const Env& env, const std::string& a, const std::string& b) {
  nlohmann::json j = {{"datasets",
                       {{{"name", "tiny"}, {"description", "test data"}, {"size", "3 MB"}, {"licence", "CC0"},
                         {"files",
                          {{{"name", "a.bin"}, {"bytes", a.size()}, {"md5", io::digest_hex("md5", a.data(), a.size())}},
                           {{"name", "b.bin"}, {"sha256", io::digest_hex("sha256", b.data(), b.size())}}}}},
                        {{"name", "one"}, {"files", {{{"name", "only.bin"}, {"md5", io::digest_hex("md5", b.data(), b.size())}}}}}}}};
  env.write("catalogue.json", j.dump());
  ::setenv("KILN_CATALOGUE", (env.root / "catalogue.json").c_str(), 1);
}

}  // namespace

TEST_CASE("the built-in catalogue lists the reference data sets with their published sums") {
  Env env;
  std::vector<std::string> names;
  for (auto& d : catalogue()) {
    names.push_back(d.name);
    CHECK_MESSAGE(!d.licence.empty(), d.name);
    CHECK_MESSAGE(!d.citation.empty(), d.name);
    CHECK_MESSAGE(!d.files.empty(), d.name);
    for (auto& f : d.files) CHECK_MESSAGE(!(f.md5.empty() && f.sha256.empty()), d.name, "/", f.name);
  }
  CHECK(names == std::vector<std::string>{"mnist", "fashion-mnist", "cifar-10", "cifar-100", "imagenet-ilsvrc2012"});
  DatasetInfo f = catalogue_entry("fashion-mnist");
  REQUIRE(f.files.size() == 4);
  CHECK(f.files[0].name == "train-images-idx3-ubyte.gz");
  CHECK(f.files[0].md5 == "8d4fb7e6c68d591d4c3dfef9ec88bf0d");
  CHECK(catalogue_entry("imagenet-ilsvrc2012").manual);
  CHECK_THROWS_KILN(catalogue_entry("nope"), "unknown data set 'nope' (known: mnist, fashion-mnist");
  CHECK(data_root() == (env.root / "data").string());
  ::unsetenv("KILN_DATA");
  CHECK(data_root() == std::string(std::getenv("HOME")) + "/.cache/kiln/data");
}

TEST_CASE("fetch copies from file:// and paths, resumes a .part, and verify finds a corrupted byte") {
  Env env;
  const std::string a = pattern(3 << 20, 1), b = pattern(1000, 2);
  env.write("src/a.bin", a);
  env.write("src/b.bin", b);
  write_user_catalogue(env, a, b);
  CHECK(find_dataset("tiny") == "");

  std::vector<std::string> log;
  FetchOptions opt;
  opt.from = "file://" + (env.root / "src").string();
  opt.log = [&](const std::string& s) { log.push_back(s); };
  const std::string dir = fetch_dataset("tiny", opt);
  CHECK(dir == (env.root / "data" / "tiny").string());
  CHECK(slurp(dir + "/a.bin") == a);
  CHECK(slurp(dir + "/b.bin") == b);
  CHECK(!fs::exists(dir + "/a.bin.part"));
  CHECK(find_dataset("tiny") == dir);
  for (auto& c : verify_dataset("tiny")) CHECK_MESSAGE(c.ok, c.file, ": ", c.detail);

  // One flipped byte in the middle of a.bin.
  {
    std::fstream f(dir + "/a.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(1 << 20);
    f.put(char(a[1 << 20] ^ 0x40));
  }
  auto checks = verify_dataset("tiny");
  REQUIRE(checks.size() == 2);
  CHECK(!checks[0].ok);
  CHECK(checks[0].file == "a.bin");
  CHECK(checks[0].detail.find("checksum mismatch: md5 ") == 0);
  CHECK(checks[1].ok);

  // Fetch again: the damaged file is replaced; a half-copied .part is resumed from its size.
  fs::remove(dir + "/b.bin");
  env.write("data/tiny/a.bin.part", a.substr(0, 1234567));
  log.clear();
  opt.from = (env.root / "src").string();  // a plain path this time
  fetch_dataset("tiny", opt);
  CHECK(slurp(dir + "/a.bin") == a);
  CHECK(slurp(dir + "/b.bin") == b);
  bool resumed = false;
  for (auto& l : log) resumed |= l.find("resuming at 1234567 bytes") != std::string::npos;
  CHECK_MESSAGE(resumed, "log: ", nlohmann::json(log).dump());

  // A .part that is not a prefix of the source fails the checksum and is removed.
  fs::remove(dir + "/a.bin");
  std::string wrong = a.substr(0, 1000);
  wrong[10] ^= 1;
  env.write("data/tiny/a.bin.part", wrong);
  CHECK_THROWS_KILN(fetch_dataset("tiny", opt), "'a.bin' of data set 'tiny' from '");
  CHECK(!fs::exists(dir + "/a.bin.part"));
  CHECK(!fs::exists(dir + "/a.bin"));
  fetch_dataset("tiny", opt);  // and the next fetch starts clean
  CHECK(slurp(dir + "/a.bin") == a);

  // A one-file data set from one file path, into --dir.
  FetchOptions one;
  one.from = (env.root / "src" / "b.bin").string();
  one.dir = (env.root / "elsewhere").string();
  CHECK(fetch_dataset("one", one) == one.dir);
  CHECK(slurp(one.dir + "/only.bin") == b);
  // A one-file source for a two-file data set, and a missing source.
  opt.from = (env.root / "src" / "b.bin").string();
  opt.dir = (env.root / "other").string();
  CHECK_THROWS_KILN(fetch_dataset("tiny", opt), "is one file but data set 'tiny' has 2 files");
  opt.from = (env.root / "nowhere").string() + "/";
  CHECK_THROWS_KILN(fetch_dataset("tiny", opt), "source '");
}

TEST_CASE("ImageNet explains the manual download; a bad user catalogue is named") {
  Env env;
  CHECK_THROWS_KILN(fetch_dataset("imagenet-ilsvrc2012"), "https://image-net.org/download.php");
  auto checks = verify_dataset("imagenet-ilsvrc2012", (env.root / "src").string());
  for (auto& c : checks) CHECK(c.detail == "missing");
  env.write("bad.json", "{\"datasets\": [{\"name\": \"x\"}]}");
  ::setenv("KILN_CATALOGUE", (env.root / "bad.json").c_str(), 1);
  CHECK_THROWS_KILN(catalogue(), "bad.json': data set 'x' has no \"files\" list");
}

TEST_CASE("an archive is unpacked after its checksum passes and find_dataset returns its folder") {
  Env env;
  fs::create_directories(env.root / "pack" / "batches");
  env.write("pack/batches/data_batch_1.bin", pattern(3073, 3));
  const std::string tgz = (env.root / "src" / "tiny.tar.gz").string();
  REQUIRE(std::system(("tar -czf '" + tgz + "' -C '" + (env.root / "pack").string() + "' batches").c_str()) == 0);
  const std::string bytes = slurp(tgz);
  nlohmann::json j = {{"datasets",
                       {{{"name", "tarred"}, {"extract", "tiny.tar.gz"}, {"data_subdir", "batches"},
                         {"files", {{{"name", "tiny.tar.gz"}, {"sha256", io::digest_hex("sha256", bytes.data(), bytes.size())}}}}}}}};
  env.write("catalogue.json", j.dump());
  ::setenv("KILN_CATALOGUE", (env.root / "catalogue.json").c_str(), 1);
  FetchOptions opt;
  opt.from = tgz;
  fetch_dataset("tarred", opt);
  CHECK(find_dataset("tarred") == (env.root / "data" / "tarred" / "batches").string());
  CHECK(slurp(find_dataset("tarred") + "/data_batch_1.bin") == pattern(3073, 3));
}
