// Interop with the reference implementation: a file written by kiln loads in the Python
// `safetensors` package with the same values, and the reverse. Skips (passes with a message) when
// python3, numpy or safetensors is not installed: they are optional tools, not build requirements.
//   ctest --test-dir build -R io.test_safetensors_interop
#include "tests/support/testing.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "io/safetensors.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {
bool have_python_safetensors() {
  return std::system("python3 -c 'import safetensors.numpy, numpy' >/dev/null 2>&1") == 0;
}
}  // namespace

TEST_CASE("kiln and the Python safetensors package read each other's files") {
  if (!have_python_safetensors()) {
    MESSAGE("skipped: python3 with safetensors and numpy not available");
    return;
  }
  fs::path dir = fs::temp_directory_path() / ("kiln_io_interop_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string from_kiln = (dir / "from_kiln.safetensors").string();
  std::string from_py = (dir / "from_py.safetensors").string();
  std::string script = (dir / "check.py").string();

  // Values both sides compute exactly.
  save_safetensors(from_kiln,
                   {{"f32", from_vector(std::vector<double>{0, 0.5, 1, 1.5, 2, 2.5}, {2, 3}, DType::float32)},
                    {"f64", arange(4, DType::float64)},
                    {"f16", arange(5, DType::float16)},
                    {"i32", from_vector(std::vector<double>{-1, 0, 1}, {3}, DType::int32)},
                    {"i64", arange(2, DType::int64).reshape({1, 2, 1})},
                    {"u8", arange(7, DType::uint8)},
                    {"scalar", scalar_tensor(2.5, DType::float32)},
                    {"empty", zeros({0, 3}, DType::float32)}},
                   {{"who", "kiln"}});
  {
    std::ofstream py(script);
    py << R"(import sys, numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file, save_file
t = load_file(sys.argv[1])
want = {"f32": np.arange(6, dtype=np.float32).reshape(2, 3) * np.float32(0.5),
        "f64": np.arange(4, dtype=np.float64), "f16": np.arange(5, dtype=np.float16),
        "i32": np.arange(3, dtype=np.int32) - 1, "i64": np.arange(2, dtype=np.int64).reshape(1, 2, 1),
        "u8": np.arange(7, dtype=np.uint8), "scalar": np.array(2.5, dtype=np.float32),
        "empty": np.zeros((0, 3), dtype=np.float32)}
assert sorted(t) == sorted(want), sorted(t)
for k, v in want.items():
    assert t[k].dtype == v.dtype and t[k].shape == v.shape and np.array_equal(t[k], v), (k, t[k], v)
with safe_open(sys.argv[1], "np") as f:
    assert f.metadata() == {"who": "kiln"}, f.metadata()
save_file({"w": np.arange(12, dtype=np.float32).reshape(3, 4) / 4, "n": np.array([-3, 9], dtype=np.int64),
           "h": np.array([1.5, -2], dtype=np.float16), "b": np.arange(4, dtype=np.uint8)},
          sys.argv[2], metadata={"who": "python"})
print("python side ok")
)";
  }
  std::string cmd = "python3 '" + script + "' '" + from_kiln + "' '" + from_py + "'";
  CHECK_MESSAGE(std::system(cmd.c_str()) == 0, "python check failed: ", cmd);

  std::map<std::string, std::string> meta;
  NamedTensors got = load_safetensors(from_py, &meta);
  CHECK(meta == std::map<std::string, std::string>{{"who", "python"}});
  std::map<std::string, Tensor> byname(got.begin(), got.end());
  REQUIRE(byname.size() == 4);
  CHECK(byname["w"].dtype() == DType::float32);
  CHECK(byname["w"].sizes() == Shape{3, 4});
  CHECK(byname["w"].at({2, 3}) == 11.0 / 4);
  CHECK(byname["n"].dtype() == DType::int64);
  CHECK(byname["n"].to_vector() == std::vector<double>{-3, 9});
  CHECK(byname["h"].dtype() == DType::float16);
  CHECK(byname["h"].to_vector() == std::vector<double>{1.5, -2});
  CHECK(byname["b"].to_vector() == std::vector<double>{0, 1, 2, 3});
  fs::remove_all(dir);
}
