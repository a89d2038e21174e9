// Debian's Fashion-MNIST (dataset-fashion-mnist, gzip files recompressed by Debian) accepted by
// the catalogue's decompressed checksums, found as installed, and fetched from file:// into
// KILN_DATA. Skipped without the package; fails without it under CI=true (install-deps installs it).
//   ctest --test-dir build -R io.test_catalogue_fashion
#include "tests/support/testing.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "io/data/catalogue.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

// An empty KILN_DATA of its own and no user catalogue, for the life of the object.
struct Env {
  fs::path root;
  Env() : root(fs::temp_directory_path() / ("kiln_catalogue_fashion_" + std::to_string(::getpid()))) {
    fs::remove_all(root);
    fs::create_directories(root);
    ::setenv("KILN_DATA", (root / "data").c_str(), 1);
    ::unsetenv("KILN_CATALOGUE");
  }
  ~Env() {
    ::unsetenv("KILN_DATA");
    fs::remove_all(root);
  }
};

}  // namespace

TEST_CASE("Debian's Fashion-MNIST is accepted by its decompressed checksums") {
  const std::string debian = "/usr/share/datasets/fashion-mnist";
  if (!test::need_path(debian + "/train-labels-idx1-ubyte.gz", "Fashion-MNIST",
                       "Debian's dataset-fashion-mnist: tools/install-deps.sh --test"))
    return;
  Env env;
  for (auto& c : verify_dataset("fashion-mnist", debian)) CHECK_MESSAGE(c.ok, c.file, ": ", c.detail);
  CHECK(find_dataset("fashion-mnist") == debian);  // not in KILN_DATA: Debian's copy
  FetchOptions opt;
  opt.from = "file://" + debian;
  fetch_dataset("fashion-mnist", opt);
  CHECK(find_dataset("fashion-mnist") == (env.root / "data" / "fashion-mnist").string());
  for (auto& c : verify_dataset("fashion-mnist")) {
    CHECK_MESSAGE(c.ok, c.file, ": ", c.detail);
    CHECK(c.detail == "decompressed sha256 and md5 ok (recompressed copy)");
  }
}
