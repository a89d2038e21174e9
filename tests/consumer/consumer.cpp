// A program built against an INSTALLED kiln (tests/consumer/run_consumer.sh): CMake's
// find_package(kiln) or pkg-config, shared or static. It checks values a user would rely on and
// exits non-zero with a message on the first mismatch; "consumer: OK" on success.
//   ctest --test-dir build -R consumer
#include <kiln/kiln.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

int failures = 0;

// |got - want| <= tol; a NaN or infinity (the references here are finite) never is.
bool near(double got, double want, double tol) { return std::fabs(got - want) <= tol; }

void expect_near(const char* what, double got, double want, double tol = 1e-5) {
  if (!near(got, want, tol)) {
    std::printf("FAIL %s: got %.8g, want %.8g\n", what, got, want);
    ++failures;
  }
}

}  // namespace

int main() {
  using namespace kiln;
  // The check itself must see a planted NaN and infinity.
  if (near(NAN, 1, 1e-5) || near(INFINITY, 1, 1e-5) || !near(1 + 1e-6, 1, 1e-5)) {
    std::printf("FAIL expect_near passes a NaN or an infinity\n");
    return 1;
  }
  // Version and build configuration, at run time and at compile time agreeing.
  std::printf("%s", build_info_text().c_str());
  expect_near("version_major", version_major(), KILN_VERSION_MAJOR, 0);
  expect_near("version_minor", version_minor(), KILN_VERSION_MINOR, 0);
  if (std::strcmp(version(), KILN_VERSION_STRING) != 0) {
    std::printf("FAIL version %s vs header %s\n", version(), KILN_VERSION_STRING);
    ++failures;
  }
  expect_near("build_info.cuda", build_info().cuda, KILN_BUILT_WITH_CUDA, 0);

  // Ops: [[1,2],[3,4]] @ [[5,6],[7,8]] = [[19,22],[43,50]].
  Tensor a = from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  Tensor b = from_vector(std::vector<float>{5, 6, 7, 8}, {2, 2});
  std::vector<double> c = ops::matmul(a, b).to_vector();
  const double want_c[] = {19, 22, 43, 50};
  for (int i = 0; i < 4; ++i) expect_near("matmul", c[i], want_c[i]);

  // Autograd: d/dx sum(relu(x) * x) = 2x for x > 0, 0 otherwise.
  Tensor x = from_vector(std::vector<float>{-1.5f, 0.5f, 2.0f}, {3});
  x.requires_grad_();
  Tensor y = ops::sum(ops::mul(ops::relu(x), x));
  y.backward();
  expect_near("sum(relu(x)*x)", y.item(), 0.25 + 4.0);
  std::vector<double> g = x.grad().to_vector();
  expect_near("grad[0]", g[0], 0);
  expect_near("grad[1]", g[1], 1.0);
  expect_near("grad[2]", g[2], 4.0);

  // A layer with known weights: Linear(2 -> 1), w = [3, -1], bias 0.5; x = [2, 1] -> 5.5.
  auto lin = make<Linear>(2, 1);
  for (auto& [name, p] : lin->named_parameters()) {
    NoGradGuard ng;
    if (name == "weight") p.copy_(from_vector(std::vector<float>{3, -1}, {1, 2}));
    if (name == "bias") p.copy_(from_vector(std::vector<float>{0.5f}, {1}));
  }
  expect_near("linear", lin->forward(from_vector(std::vector<float>{2, 1}, {1, 2})).item(), 5.5);

  // The zoo and the dispatcher are reachable.
  if (nets::find("mnist-cnn").parameters != 1199882) {
    std::printf("FAIL mnist-cnn parameters %lld\n", (long long)nets::find("mnist-cnn").parameters);
    ++failures;
  }
  if (registry().ops().empty()) {
    std::printf("FAIL no ops registered\n");
    ++failures;
  }
  if (failures) return 1;
  std::printf("consumer: OK\n");
  return 0;
}
