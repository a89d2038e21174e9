// Pooling and LRN: native float32 against ref float64 (outputs and input gradients) and
// finite-difference gradients, over odd shapes, batch 1, non-contiguous inputs, and the
// kernel/stride/padding/dilation/ceil_mode/count_include_pad/divisor cases the ops take.
//   ctest --test-dir build -R grad.test_pool_grad
#include "tests/support/testing.h"
#include "tests/support/grad_inputs.h"

#include <algorithm>
#include <array>
#include <numeric>
#include <random>

#include "engine/ops/norm.h"
#include "engine/ops/pool.h"

using namespace kiln;
using kiln::test::make_input;
using kiln::test::non_contiguous;
using kiln::test::req;
using kiln::test::distinct_input;

namespace {

using P2 = std::array<int64_t, 2>;

struct MaxCase {
  Shape x;
  P2 k, s, p, d;
  bool ceil;
};

}  // namespace

TEST_CASE("max_pool2d: native vs ref, and gradients") {
  std::vector<MaxCase> cases = {
      {{1, 1, 5, 5}, {2, 2}, {2, 2}, {1, 1}, {1, 1}, true},  // ceil: the 4th window is dropped
      {{1, 1, 6, 6}, {3, 3}, {2, 2}, {0, 0}, {1, 1}, true},  // ceil: partial last window kept
      {{2, 3, 7, 6}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false},
      {{1, 2, 7, 9}, {3, 2}, {2, 3}, {1, 1}, {2, 1}, true},  // dilation + ceil
      {{2, 1, 5, 4}, {2, 3}, {1, 1}, {0, 1}, {1, 2}, false},
      {{1, 1, 4, 4}, {1, 1}, {2, 2}, {0, 0}, {1, 1}, false},  // 1x1 kernel = strided subsample
  };
  for (const MaxCase& c : cases) {
    CAPTURE(shape_str(c.x));
    CAPTURE(c.k[0]);
    CAPTURE(c.ceil);
    auto fn = [c](const std::vector<Tensor>& in) { return ops::max_pool2d(in[0], c.k, c.s, c.p, c.d, c.ceil); };
    Tensor x = req(distinct_input(c.x, 1));
    CHECK_AGAINST_REF(fn, (std::vector<Tensor>{x}));
    CHECK_AGAINST_REF(fn, (std::vector<Tensor>{req(non_contiguous(x.detach()))}));
    CHECK_GRAD(fn, (std::vector<Tensor>{x}));
  }
  // Larger shapes against ref only; 3-d input; default stride.
  auto big = [](const std::vector<Tensor>& in) { return ops::max_pool2d(in[0], {3, 3}, {2, 2}, {1, 1}, {1, 1}, true); };
  CHECK_AGAINST_REF(big, (std::vector<Tensor>{req(distinct_input({2, 4, 17, 19}, 2))}));
  auto two = [](const std::vector<Tensor>& in) { return ops::max_pool2d(in[0], {2, 2}); };
  CHECK_AGAINST_REF(two, (std::vector<Tensor>{req(distinct_input({1, 3, 32, 31}, 3))}));
  CHECK_GRAD(two, (std::vector<Tensor>{req(distinct_input({3, 5, 4}, 4))}));
}

TEST_CASE("avg_pool2d: native vs ref, and gradients") {
  struct Case {
    Shape x;
    P2 k, s, p;
    bool ceil, cip;
    std::optional<int64_t> div;
  };
  std::vector<Case> cases = {
      {{1, 1, 6, 6}, {3, 3}, {2, 2}, {1, 1}, true, true, {}},  // last window past the padded border
      {{1, 1, 6, 6}, {3, 3}, {2, 2}, {1, 1}, true, false, {}},
      {{1, 1, 5, 5}, {2, 2}, {2, 2}, {1, 1}, true, true, {}},  // dropped window
      {{2, 2, 7, 5}, {3, 2}, {2, 1}, {1, 1}, false, true, {}},
      {{2, 2, 7, 5}, {3, 2}, {2, 1}, {1, 1}, false, false, {}},
      {{1, 3, 5, 6}, {3, 3}, {3, 2}, {1, 0}, true, false, {}},
      {{1, 1, 6, 7}, {3, 3}, {2, 2}, {1, 1}, true, true, 3},  // divisor_override
      {{1, 2, 4, 4}, {4, 4}, {4, 4}, {0, 0}, false, true, {}},  // global
  };
  for (const Case& c : cases) {
    CAPTURE(shape_str(c.x));
    CAPTURE(c.ceil);
    CAPTURE(c.cip);
    auto fn = [c](const std::vector<Tensor>& in) { return ops::avg_pool2d(in[0], c.k, c.s, c.p, c.ceil, c.cip, c.div); };
    Tensor x = req(make_input(c.x, 5));
    CHECK_AGAINST_REF(fn, (std::vector<Tensor>{x}));
    CHECK_AGAINST_REF(fn, (std::vector<Tensor>{req(non_contiguous(x.detach()))}));
    CHECK_GRAD(fn, (std::vector<Tensor>{x}));
  }
  auto big = [](const std::vector<Tensor>& in) {
    return ops::avg_pool2d(in[0], {3, 3}, {2, 2}, {1, 1}, true, false);
  };
  CHECK_AGAINST_REF(big, (std::vector<Tensor>{req(make_input({2, 4, 17, 19}, 6))}));
  auto three_d = [](const std::vector<Tensor>& in) { return ops::avg_pool2d(in[0], {2, 3}, {1, 2}, {1, 1}); };
  CHECK_AGAINST_REF(three_d, (std::vector<Tensor>{req(make_input({3, 5, 7}, 7))}));
  CHECK_GRAD(three_d, (std::vector<Tensor>{req(make_input({2, 4, 5}, 7))}));
}

TEST_CASE("adaptive pooling: native vs ref, and gradients") {
  struct Case {
    Shape x;
    P2 out;
  };
  std::vector<Case> cases = {
      {{1, 2, 5, 7}, {3, 4}}, {{2, 1, 7, 5}, {3, 2}}, {{1, 1, 4, 4}, {4, 4}}, {{1, 1, 3, 3}, {5, 4}},
      {{2, 3, 3}, {2, 2}},   {{2, 3, 5, 7}, {1, 1}},  // global: native's one-sum path
  };
  for (const Case& c : cases) {
    CAPTURE(shape_str(c.x));
    auto avg = [c](const std::vector<Tensor>& in) { return ops::adaptive_avg_pool2d(in[0], c.out); };
    auto mx = [c](const std::vector<Tensor>& in) { return ops::adaptive_max_pool2d(in[0], c.out); };
    Tensor x = req(distinct_input(c.x, 8));
    for (auto& fn : {test::Fn(avg), test::Fn(mx)}) {
      CHECK_AGAINST_REF(fn, (std::vector<Tensor>{x}));
      CHECK_AGAINST_REF(fn, (std::vector<Tensor>{req(non_contiguous(x.detach()))}));
      CHECK_GRAD(fn, (std::vector<Tensor>{x}));
    }
  }
  auto big = [](const std::vector<Tensor>& in) { return ops::adaptive_avg_pool2d(in[0], {6, 6}); };
  CHECK_AGAINST_REF(big, (std::vector<Tensor>{req(make_input({2, 8, 13, 15}, 9))}));
}

TEST_CASE("local_response_norm: native vs ref, and gradients") {
  struct Case {
    Shape x;
    int64_t size;
    double alpha, beta, k;
  };
  std::vector<Case> cases = {
      {{2, 7, 3, 2}, 3, 0.01, 0.75, 1.0},  // beta 0.75 takes native's square-root path
      {{1, 6, 2, 3}, 4, 0.1, 0.6, 2.0},    // even size: window [c-2, c+1]
      {{1, 5, 3, 3}, 1, 0.5, 0.75, 1.0},
      {{2, 3, 2, 2}, 9, 0.2, 1.3, 0.5},    // window wider than the channels
      {{2, 5, 4}, 2, 0.3, 0.75, 1.0},      // 3-d
      {{1, 4, 2, 2, 2}, 3, 0.3, 0.5, 1.0}, // 5-d
  };
  for (const Case& c : cases) {
    CAPTURE(shape_str(c.x));
    CAPTURE(c.size);
    auto fn = [c](const std::vector<Tensor>& in) { return ops::local_response_norm(in[0], c.size, c.alpha, c.beta, c.k); };
    Tensor x = req(make_input(c.x, 10, DType::float64, -2, 2));
    CHECK_AGAINST_REF(fn, (std::vector<Tensor>{x}));
    if (c.x.size() >= 2) CHECK_AGAINST_REF(fn, (std::vector<Tensor>{req(non_contiguous(x.detach()))}));
    CHECK_GRAD(fn, (std::vector<Tensor>{x}));
  }
  auto alexnet = [](const std::vector<Tensor>& in) { return ops::local_response_norm(in[0], 5, 1e-4, 0.75, 2.0); };
  CHECK_AGAINST_REF(alexnet, (std::vector<Tensor>{req(make_input({2, 16, 9, 11}, 11, DType::float64, -3, 3))}));
}
