// Interop with the reference implementations in the test venv (KILN_TEST_PYTHON, made by
// tools/install-deps.sh --test): kiln's .safetensors files loaded by the PyPI `safetensors`
// package with the same values, and that package's files (every dtype kiln reads, bfloat16
// included, metadata, 0-d and empty tensors) loaded by kiln; checkpoint weights bit-equal in
// safetensors.numpy; .npy and .npz files written by numpy; TensorBoard's EventAccumulator on
// EventWriter's files. Every case needs the venv: without it the test is Skipped, and fails
// under CI=true (tests/support/testing.h, skip_missing).
//   ctest --test-dir build -R io.test_python_interop
#include "tests/support/testing.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/ops/elementwise.h"
#include "engine/random.h"
#include "io/data/datasets.h"
#include "io/formats/checkpoint.h"
#include "io/formats/npy.h"
#include "io/formats/npz.h"
#include "io/formats/safetensors.h"
#include "io/logs/tfevents.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

// Runs `python() 'ARGS'` (ARGS: the script and its arguments, joined by "' '") and returns its
// stdout; a failing script fails the test with what it printed.
std::string run_python(const std::string& args) {
  int rc = 0;
  const std::string out = test::run_capture(test::shell_quote(test::python()) + " '" + args + "' 2>&1", &rc);
  REQUIRE_MESSAGE(rc == 0, "python ", args, " exited ", rc, ":\n", out);
  return out;
}

std::string hex_bytes(const Tensor& t) {
  Tensor c = t.contiguous();
  const auto* p = static_cast<const unsigned char*>(c.data_ptr());
  std::string hex;
  for (size_t i = 0; i < size_t(c.numel()) * c.element_size(); ++i) {
    static const char* d = "0123456789abcdef";
    hex += d[p[i] >> 4];
    hex += d[p[i] & 15];
  }
  return hex;
}

}  // namespace

TEST_CASE("kiln's safetensors files load in the PyPI safetensors package with the same values") {
  if (!test::need_python("safetensors.numpy, numpy")) return;
  test::TempDir dir("st_to_python");
  const std::string from_kiln = dir / "from_kiln.safetensors", script = dir / "check.py";
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
  std::ofstream(script) << R"(import sys, numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file
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
print("python side ok:", len(t), "tensors")
)";
  const std::string out = run_python(script + "' '" + from_kiln);
  CHECK(out.find("python side ok: 8 tensors") != std::string::npos);
}

TEST_CASE("files written by the PyPI safetensors package load in kiln: every dtype, bit for bit") {
  if (!test::need_python("safetensors.numpy, numpy")) return;
  test::TempDir dir("st_from_python");
  const std::string from_py = dir / "from_py.safetensors", script = dir / "write.py";
  // numpy has no bfloat16: that tensor goes through safetensors' own serializer with its raw bits
  // (0x3fc0 = 1.5, 0xc000 = -2, 0x7f80 = +inf, 0x0001 = the smallest subnormal).
  std::ofstream(script) << R"(import sys, numpy as np
import safetensors
from safetensors import serialize_file
tensors = {"w": np.arange(12, dtype=np.float32).reshape(3, 4) / 4,
           "d": np.array([0.1, -1e300, 5e-324], dtype=np.float64),
           "h": np.array([1.5, -2, 65504, 2 ** -24], dtype=np.float16),
           "i": np.array([-(2 ** 31), 7, 2 ** 31 - 1], dtype=np.int32),
           "n": np.array([-3, 9, 2 ** 62], dtype=np.int64),
           "b": np.arange(250, 256, dtype=np.uint8).reshape(2, 3),
           "s": np.array(-0.0, dtype=np.float32),
           "e": np.zeros((2, 0), dtype=np.float32)}
bf16 = np.array([0x3fc0, 0xc000, 0x7f80, 0x0001], dtype=np.uint16)
if hasattr(safetensors, "TensorSpec"):  # safetensors >= 0.6: pointers, not bytes
    spec = lambda dt, a: safetensors.TensorSpec(dtype=dt, shape=a.shape, data_ptr=a.ctypes.data, data_len=a.nbytes)
else:
    spec = lambda dt, a: {"dtype": dt, "shape": a.shape, "data": a.tobytes()}
flat = {k: spec(v.dtype.name, v) for k, v in tensors.items()}
flat["bf"] = spec("bfloat16", bf16)
serialize_file(flat, sys.argv[1], metadata={"who": "python", "step": "7"})
print("written with safetensors", safetensors.__version__)
)";
  run_python(script + "' '" + from_py);

  std::map<std::string, std::string> meta;
  NamedTensors got = load_safetensors(from_py, &meta);
  CHECK(meta == std::map<std::string, std::string>{{"who", "python"}, {"step", "7"}});
  std::map<std::string, Tensor> t(got.begin(), got.end());
  REQUIRE(t.size() == 9);
  CHECK(t["w"].dtype() == DType::float32);
  CHECK(t["w"].sizes() == Shape{3, 4});
  CHECK(t["w"].at({2, 3}) == 11.0 / 4);
  CHECK(t["d"].dtype() == DType::float64);
  CHECK(t["d"].to_vector() == std::vector<double>{0.1, -1e300, 5e-324});
  CHECK(t["h"].dtype() == DType::float16);
  CHECK(t["h"].to_vector() == std::vector<double>{1.5, -2, 65504, std::ldexp(1.0, -24)});
  CHECK(t["i"].dtype() == DType::int32);
  CHECK(t["i"].to_vector() == std::vector<double>{-2147483648.0, 7, 2147483647.0});
  CHECK(t["n"].dtype() == DType::int64);
  CHECK(t["n"].data<int64_t>()[2] == (int64_t(1) << 62));
  CHECK(t["b"].dtype() == DType::uint8);
  CHECK(t["b"].sizes() == Shape{2, 3});
  CHECK(t["b"].to_vector() == std::vector<double>{250, 251, 252, 253, 254, 255});
  CHECK(t["s"].dim() == 0);
  CHECK(t["s"].dtype() == DType::float32);
  CHECK(std::signbit(t["s"].item()));
  CHECK(t["e"].sizes() == Shape{2, 0});
  CHECK(t["bf"].dtype() == DType::bfloat16);
  CHECK(hex_bytes(t["bf"]) == "c03f00c0807f0100");  // the bits, little-endian
  const std::vector<double> bf = t["bf"].to_vector();
  CHECK(bf[0] == 1.5);
  CHECK(bf[1] == -2);
  CHECK(std::isinf(bf[2]));
  CHECK(bf[3] == std::ldexp(1.0, -133));
}

TEST_CASE("checkpoint weights load bit-equal in safetensors.numpy") {
  if (!test::need_python("safetensors.numpy, numpy")) return;
  test::TempDir dir("ckpt_python");
  Generator gen(1);
  Checkpoint c;
  c.weights = {{"conv1.weight", randn({8, 1, 3, 3}, {}, &gen)},
               {"conv1.bias", randn({8}, {}, &gen)},
               {"bn.running_mean", randn({8}, DType::float64, &gen)},
               {"bn.num_batches_tracked", full({}, 123, DType::int64)},
               {"half", randn({5}, {}, &gen).to(DType::float16)},
               {"fc.weight", randn({10, 72}, {}, &gen)}};
  c.optimizer = {{"step", full({}, 7.0)}};
  c.state_json = R"({"model":"mnist-cnn","step":7})";
  save_checkpoint(dir / "ck", c);
  auto j = nlohmann::json::parse(run_python(KILN_SOURCE_DIR "/tests/io/dump_safetensors.py' '" + (dir / "ck.safetensors")));
  REQUIRE(j.size() == c.weights.size());
  const std::map<DType, std::string> np = {{DType::float32, "float32"},
                                           {DType::float64, "float64"},
                                           {DType::float16, "float16"},
                                           {DType::int64, "int64"}};
  for (const auto& entry : c.weights) {
    const std::string& name = entry.first;
    const Tensor& t = entry.second;
    REQUIRE_MESSAGE(j.contains(name), name);
    CHECK(j[name]["dtype"] == np.at(t.dtype()));
    CHECK(j[name]["shape"].get<std::vector<int64_t>>() == std::vector<int64_t>(t.sizes().begin(), t.sizes().end()));
    CHECK_MESSAGE(j[name]["hex"] == hex_bytes(t), name);
  }
}

TEST_CASE("read_npy reads numpy's own np.save: every dtype it supports, 0-d and Fortran refused") {
  if (!test::need_python("numpy")) return;
  test::TempDir dir("npy_numpy");
  const std::string d = dir.path.string(), script = dir / "make.py";
  std::ofstream(script) << R"(import sys, numpy as np
d = sys.argv[1]
np.save(d + '/f4.npy', np.arange(12, dtype=np.float32).reshape(3, 4) / 4)
np.save(d + '/f8.npy', np.array([0.125, -1e300, np.nan]))
np.save(d + '/i4.npy', np.array([[-7, 0], [2 ** 30, 3]], dtype=np.int32).reshape(1, 2, 2))
np.save(d + '/i8.npy', np.array([-(2 ** 40), 2, 3], dtype=np.int64))
np.save(d + '/u1.npy', np.array([0, 200, 255], dtype=np.uint8))
np.save(d + '/b1.npy', np.array([True, False, True]))
np.save(d + '/scalar.npy', np.float32(42))
np.save(d + '/fortran.npy', np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)))
)";
  run_python(script + "' '" + d);
  Tensor a = read_npy(d + "/f4.npy");
  CHECK(a.sizes() == Shape{3, 4});
  CHECK(a.dtype() == DType::float32);
  for (int i = 0; i < 12; ++i) CHECK(a.data<float>()[i] == i / 4.0f);
  Tensor f8 = read_npy(d + "/f8.npy");
  CHECK(f8.dtype() == DType::float64);
  CHECK(f8.data<double>()[1] == -1e300);
  CHECK(std::isnan(f8.data<double>()[2]));
  Tensor i4 = read_npy(d + "/i4.npy");
  CHECK(i4.dtype() == DType::int32);
  CHECK(i4.sizes() == Shape{1, 2, 2});
  CHECK(i4.to_vector() == std::vector<double>{-7, 0, 1 << 30, 3});
  Tensor i8 = read_npy(d + "/i8.npy");
  CHECK(i8.dtype() == DType::int64);
  CHECK(i8.data<int64_t>()[0] == -(int64_t(1) << 40));
  Tensor u1 = read_npy(d + "/u1.npy");
  CHECK(u1.dtype() == DType::uint8);
  CHECK(u1.to_vector() == std::vector<double>{0, 200, 255});
  Tensor b = read_npy(d + "/b1.npy");
  CHECK(b.dtype() == DType::boolean);
  CHECK(b.to_vector() == std::vector<double>{1, 0, 1});
  Tensor s = read_npy(d + "/scalar.npy");
  CHECK(s.dim() == 0);
  CHECK(s.item() == 42);
  CHECK_THROWS_KILN(read_npy(d + "/fortran.npy"), "Fortran-order array");
}

TEST_CASE("read_npz reads numpy's own np.savez and np.savez_compressed; NpzDataset and open_dataset_dir") {
  if (!test::need_python("numpy")) return;
  test::TempDir tmp("npz_numpy");
  const std::string dir = tmp.path.string();
  std::string script = dir + "/make.py";
  std::ofstream(script) << R"(import sys, numpy as np
d = sys.argv[1]
r = np.random.RandomState(0)
np.savez(d + '/plain.npz', f32=np.arange(6, dtype=np.float32).reshape(2, 3) / 4, f64=np.linspace(0, 1, 5),
         i32=np.array([-2, 7], dtype=np.int32), u8=np.arange(250, 256, dtype=np.uint8), b=np.array([True, False]),
         empty=np.zeros((0, 4), dtype=np.float32), scalar=np.float64(2.5))
x = (np.arange(20 * 8 * 8) % 251).astype(np.uint8).reshape(20, 8, 8)
np.savez_compressed(d + '/mnistlike.npz', x_train=x[:15], y_train=(np.arange(15) % 4).astype(np.uint8),
                    x_test=x[15:], y_test=np.arange(5, dtype=np.int64) % 4)
img = r.rand(30, 16, 16).astype(np.float32)
np.savez_compressed(d + '/astro.npz', images=img, masks=(img > 0.5))
)";
  run_python(script + "' '" + dir);

  auto plain = read_npz(dir + "/plain.npz");
  std::map<std::string, Tensor> m(plain.begin(), plain.end());
  REQUIRE(m.size() == 7);
  CHECK(m["f32"].dtype() == float32);
  CHECK(m["f32"].to_vector() == std::vector<double>{0, 0.25, 0.5, 0.75, 1, 1.25});
  CHECK(m["f64"].dtype() == float64);
  CHECK(m["f64"].at({3}) == 0.75);
  CHECK(m["i32"].to_vector() == std::vector<double>{-2, 7});
  CHECK(m["u8"].at({5}) == 255);
  CHECK(m["b"].to_vector() == std::vector<double>{1, 0});
  CHECK(m["empty"].sizes() == Shape{0, 4});
  CHECK(m["scalar"].dim() == 0);
  CHECK(m["scalar"].item() == 2.5);

  Splits s = open_dataset_dir(dir + "/mnistlike.npz");
  CHECK(s.name == "npz");
  CHECK(s.train->size() == 15);
  CHECK(s.test->size() == 5);
  CHECK(s.sample_shape == Shape{1, 8, 8});
  CHECK(s.classes == 4);
  CHECK_FALSE(s.segmentation);
  Example e = s.train->get(1);
  CHECK(e.input.dtype() == uint8);
  CHECK(e.input.at({0, 0, 3}) == (64 + 3) % 251);
  CHECK(e.target.dtype() == int64);
  CHECK(e.target.item() == 1);

  NpzDataset astro(dir + "/astro.npz", "images", "masks");
  CHECK(astro.size() == 30);
  CHECK(astro.sample_shape() == Shape{1, 16, 16});
  Example a = astro.get(2);
  CHECK(a.target.dtype() == float32);
  CHECK(a.target.sizes() == Shape{1, 16, 16});
  for (int64_t i = 0; i < 16; ++i) CHECK(a.target.at({0, 3, i}) == (a.input.at({0, 3, i}) > 0.5 ? 1.0 : 0.0));
  Splits sa = open_dataset_dir(dir + "/astro.npz");
  CHECK(sa.train->size() == 27);
  CHECK(sa.test->size() == 3);
  CHECK(sa.segmentation);
  CHECK(sa.classes == 1);
  CHECK(sa.test->get(0).input.to_vector() == astro.get(27).input.to_vector());
  CHECK_THROWS_KILN(NpzDataset(dir + "/astro.npz", "x", "masks"), "no array 'x' (has: images, masks)");
}

TEST_CASE("TensorBoard's EventAccumulator reads every scalar and histogram back") {
  if (!test::need_python("tensorboard")) return;
  test::TempDir tmp("tfevents_tb");
  const fs::path dir = tmp.path / "events";
  struct S { std::string tag; int64_t step; double value; };
  std::vector<S> scalars;
  for (int64_t s = 0; s < 30; ++s) {
    scalars.push_back({"train/loss", s, 2.5 / (1.0 + s)});
    if (s % 10 == 0) scalars.push_back({"val/acc", s, 0.1 + s * 0.02});
  }
  scalars.push_back({"lr", 7, 1e-3});
  scalars.push_back({"lr", 8, -0.0});
  Generator gen(42);
  std::vector<std::pair<std::string, Tensor>> hists = {
      {"weights/conv1", randn({64, 3, 3, 3}, {}, &gen)},
      {"weights/fc", rand({100}, DType::float64, &gen) * 1e-6},
      {"ints", arange(17, DType::int64)},
      {"constant", full({5}, 3.0)},
      {"empty", zeros({0})}};
  std::string path;
  {
    EventWriter w(dir.string());
    for (auto& s : scalars) w.add_scalar(s.tag, s.value, s.step);
    for (size_t i = 0; i < hists.size(); ++i) w.add_histogram(hists[i].first, hists[i].second, int64_t(i) * 5);
    w.flush();
    path = w.path();
  }
  auto j = nlohmann::json::parse(run_python(KILN_SOURCE_DIR "/tests/io/read_tfevents.py' '" + path));

  size_t seen = 0;
  for (auto& [tag, events] : j["scalars"].items()) seen += events.size();
  CHECK(seen == scalars.size());
  for (auto& s : scalars) {
    bool found = false;
    for (auto& e : j["scalars"][s.tag])
      if (e[0].get<int64_t>() == s.step) {
        CHECK(e[1].get<double>() == double(float(s.value)));
        found = true;
      }
    CHECK_MESSAGE(found, s.tag, " step ", s.step);
  }

  REQUIRE(j["histograms"].size() == hists.size());
  for (size_t i = 0; i < hists.size(); ++i) {
    const std::string& tag = hists[i].first;
    const Tensor& t = hists[i].second;
    std::vector<double> v = t.to_vector();
    auto& e = j["histograms"][tag];
    REQUIRE(e.size() == 1);
    auto& h = e[0];
    CHECK(h["step"].get<int64_t>() == int64_t(i) * 5);
    CHECK(h["num"].get<double>() == double(v.size()));
    double mn = v.empty() ? 0 : *std::min_element(v.begin(), v.end());
    double mx = v.empty() ? 0 : *std::max_element(v.begin(), v.end());
    double sum = 0, sq = 0;
    for (double x : v) sum += x, sq += x * x;
    CHECK(h["min"].get<double>() == mn);
    CHECK(h["max"].get<double>() == mx);
    CHECK(h["sum"].get<double>() == doctest::Approx(sum).epsilon(1e-12));
    CHECK(h["sum_squares"].get<double>() == doctest::Approx(sq).epsilon(1e-12));
    // Recount each value into the limits TensorBoard returned: limit[k-1] <= x < limit[k].
    auto lim = h["bucket_limit"].get<std::vector<double>>();
    auto cnt = h["bucket"].get<std::vector<double>>();
    REQUIRE(lim.size() == cnt.size());
    std::vector<double> want(lim.size(), 0);
    for (double x : v) {
      size_t k = 0;
      while (k < lim.size() && !(x < lim[k])) ++k;
      REQUIRE(k < lim.size());
      want[k] += 1;
    }
    CHECK_MESSAGE(cnt == want, tag);
    // Every limit is one of TensorFlow's defaults.
    for (double l : lim)
      CHECK(std::binary_search(default_histogram_limits().begin(), default_histogram_limits().end(), l));
  }
}
