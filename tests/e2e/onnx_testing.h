// Shared by the ONNX tests (test_onnx.cpp, test_onnx_runtime.cpp): raw float files, the zoo nets
// exported (with non-trivial batch-norm statistics) and their inputs, NaN-aware differences.
#pragma once

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "nets/zoo.h"
#include "tests/support/testing.h"

namespace kiln::onnx_test {

inline void write_floats(const Tensor& t, const std::string& path) {
  std::vector<float> v = t.contiguous().to_vector_of<float>();
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * sizeof(float)));
}

inline std::vector<float> read_floats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> v(b.size() / sizeof(float));
  std::copy(b.begin(), b.begin() + std::ptrdiff_t(v.size() * sizeof(float)), reinterpret_cast<char*>(v.data()));
  return v;
}

// Deterministic values, so batch norm's scale, shift, mean and variance all differ from their
// defaults (0 / 1 would hide a mix-up of the BatchNormalization inputs).
inline void perturb_batch_norm(Module& net) {
  int k = 0;
  for (auto& [name, t] : net.state_dict()) {
    if (t.dim() != 1 || !is_floating(t.dtype())) continue;
    const bool var = name.find("running_var") != std::string::npos;
    const bool bn = var || name.find("running_mean") != std::string::npos ||
                    (name.find("bn") != std::string::npos);
    if (!bn) continue;
    float* p = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i, ++k)
      p[i] = var ? float(0.5 + 0.4 * std::cos(0.37 * k))
                 : float(0.2 * std::sin(0.71 * k)) + (name.find("weight") != std::string::npos ? 1.f : 0.f);
  }
}

inline Tensor input_for(const Shape& shape) {
  const int64_t n = shape_numel(shape);
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = float(std::sin(0.013 * double(i) + 0.5) * 1.5);
  return from_vector(v, shape);
}

// The largest |x| (+inf when an element is NaN or infinite).
inline double max_abs(const std::vector<float>& v) {
  return test::max_abs_diff(test::as_doubles(v), std::vector<double>(v.size(), 0.0));
}

// The largest |a - b|; +inf on a size mismatch or where one side is NaN or infinite
// (test::max_abs_diff).
inline double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  return test::max_abs_diff(test::as_doubles(a), test::as_doubles(b));
}

// A zoo net, its options and the input it runs on.
struct Case {
  std::string name;
  nets::NetOptions options;
  Shape input;
};

// The nets both zoo tests export (small inputs: the whole set runs in seconds).
inline std::vector<Case> zoo_cases() {
  nets::NetOptions unet;
  unet.width = 8;
  unet.depth = 3;
  nets::NetOptions small;
  small.image_size = 64;
  nets::NetOptions incep;
  incep.image_size = 75;
  return {
      {"mnist-cnn", {}, {2, 1, 28, 28}},        {"cifar10-cnn", {}, {2, 3, 32, 32}},
      {"resnet56", {}, {2, 3, 32, 32}},         {"resnet18", small, {2, 3, 64, 64}},
      {"googlenet", small, {1, 3, 64, 64}},     {"inception3", incep, {1, 3, 75, 75}},
      {"unet", unet, {2, 1, 32, 32}},
  };
}

// The net of `c` with perturbed batch-norm statistics, in eval mode.
inline ModulePtr eval_net(const Case& c) {
  ModulePtr net = nets::build(c.name, c.options);
  perturb_batch_norm(*net);
  net->eval();
  return net;
}

// Its eval-mode output on `x`, as float32 values.
inline std::vector<float> forward(Module& net, const Tensor& x) {
  NoGradGuard g;
  return net(x).contiguous().to_vector_of<float>();
}

}  // namespace kiln::onnx_test
