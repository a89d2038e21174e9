// The per-layer profiler: forward time per module scope (exclusive of child scopes) and backward
// time charged to the scope that created each autograd node.
//   ctest --test-dir build -R engine.test_profiler
#include "tests/support/testing.h"

#include <chrono>
#include <thread>

#include "engine/function.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"
#include "engine/profiler.h"
#include "layers/activation.h"
#include "layers/linear.h"

using namespace kiln;

namespace {
// A layer whose forward and backward each take at least 2 ms (a sleep): time the profiler must
// charge to it, a lower bound no busy machine can undercut.
constexpr double kSleepMs = 2;
struct SleepFn : autograd::Function<SleepFn> {
  static const char* name() { return "SleepFn"; }
  static Tensor forward(autograd::AutogradContext*, const Tensor& x) {
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(kSleepMs));
    return x * 1.0;
  }
  static std::vector<Tensor> backward(autograd::AutogradContext*, std::vector<Tensor> g) {
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(kSleepMs));
    return {g[0]};
  }
};
class Sleep : public Module {
 public:
  Tensor forward(const Tensor& x) override { return SleepFn::apply(x); }
  std::string repr() const override { return "Sleep"; }
};
}  // namespace

TEST_CASE("rows per layer path with forward and backward calls") {
  auto net = make<Sequential>();
  net->add("fc", make<Linear>(64, 32)).add("act", make<Tanh>()).add("out", make<Linear>(32, 4));
  net->add("nap", make<Sleep>());
  net->assign_paths();
  CHECK((*net)[0]->path() == "fc");
  profiler::reset();
  profiler::enable();
  for (int i = 0; i < 3; ++i) {
    Tensor y = (*net)(randn({8, 64}));
    ops::sum(y).backward();
  }
  profiler::enable(false);
  auto rows = profiler::rows();
  profiler::reset();
  // The root Sequential has an empty path and is named by its repr.
  REQUIRE(rows.size() == 5);
  CHECK(rows[0].name == "Sequential");
  CHECK(rows[1].name == "fc");
  CHECK(rows[1].kind.find("Linear") == 0);
  CHECK(rows[2].name == "act");
  CHECK(rows[3].name == "out");
  CHECK(rows[4].name == "nap");
  for (size_t i = 1; i < rows.size(); ++i) {
    CAPTURE(rows[i].name);
    CHECK(rows[i].forward_calls == 3);
    CHECK(rows[i].backward_calls >= 3);  // at least one node per layer per pass
    CHECK(rows[i].forward_ms >= 0);
    CHECK(rows[i].backward_ms >= 0);
  }
  // Three passes of the sleeping layer: at least 3 x 2 ms each way, charged to its own row.
  CHECK(rows[4].forward_ms >= 3 * kSleepMs);
  CHECK(rows[4].backward_ms >= 3 * kSleepMs);
  // Nodes made outside any module (the sum) are not charged to a layer.
  CHECK(rows[0].backward_calls == 0);
}

TEST_CASE("disabled profiler records nothing") {
  profiler::reset();
  auto l = make<Linear>(4, 4);
  (*l)(randn({2, 4}));
  CHECK(profiler::rows().empty());
}
