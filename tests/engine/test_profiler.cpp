// The per-layer profiler: forward time per module scope (exclusive of child scopes) and backward
// time charged to the scope that created each autograd node.
//   ctest --test-dir build -R engine.test_profiler
#include "tests/support/testing.h"

#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"
#include "engine/profiler.h"
#include "layers/activation.h"
#include "layers/linear.h"

using namespace kiln;

TEST_CASE("rows per layer path with forward and backward calls") {
  auto net = make<Sequential>();
  net->add("fc", make<Linear>(64, 32)).add("act", make<Tanh>()).add("out", make<Linear>(32, 4));
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
  REQUIRE(rows.size() == 4);
  CHECK(rows[0].name == "Sequential");
  CHECK(rows[1].name == "fc");
  CHECK(rows[1].kind.find("Linear") == 0);
  CHECK(rows[2].name == "act");
  CHECK(rows[3].name == "out");
  for (size_t i = 1; i < rows.size(); ++i) {
    CAPTURE(rows[i].name);
    CHECK(rows[i].forward_calls == 3);
    CHECK(rows[i].backward_calls >= 3);  // at least one node per layer per pass
    CHECK(rows[i].forward_ms > 0);
    CHECK(rows[i].backward_ms > 0);
  }
  // Nodes made outside any module (the sum) are not charged to a layer.
  CHECK(rows[0].backward_calls == 0);
}

TEST_CASE("disabled profiler records nothing") {
  profiler::reset();
  auto l = make<Linear>(4, 4);
  (*l)(randn({2, 4}));
  CHECK(profiler::rows().empty());
}
