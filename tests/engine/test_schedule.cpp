// Learning-rate schedules: closed forms, PyTorch's schedulers' values, warm-up composition, errors.
//   ctest --test-dir build -R engine.test_schedule
#include "tests/support/testing.h"

#include <cmath>

#include "engine/schedule.h"

using namespace kiln;
using optim::make_schedule;

namespace {

// lr of steps 0..11 from torch 1.13 (base lr 0.1), generated once by /usr/bin/python3:
//   import torch
//   def lrs(make, n=12):
//       p = torch.zeros(1, requires_grad=True)
//       o = torch.optim.SGD([p], lr=0.1)
//       s = make(o); out = []
//       for _ in range(n):
//           out.append(o.param_groups[0]['lr']); o.step(); s.step()
//       return ', '.join('%.12g' % v for v in out)
//   L = torch.optim.lr_scheduler
//   print('steplr', lrs(lambda o: L.StepLR(o, 3, 0.5)))
//   print('multistep', lrs(lambda o: L.MultiStepLR(o, [2, 5], 0.1)))
//   print('cosine', lrs(lambda o: L.CosineAnnealingLR(o, 10, eta_min=0.001)))
//   print('poly', lrs(lambda o: L.PolynomialLR(o, total_iters=10, power=2.0)))
//   print('warm_cos', lrs(lambda o: L.SequentialLR(o, [L.LinearLR(o, start_factor=1/3, total_iters=2),
//                                                     L.CosineAnnealingLR(o, 9)], milestones=[3])))
void check_lrs(const optim::LRSchedule& s, const std::vector<double>& want, int64_t upto) {
  CAPTURE(s.describe());
  for (int64_t i = 0; i < upto; ++i) {
    CAPTURE(i);
    CHECK(0.1 * s.factor(i) == doctest::Approx(want[size_t(i)]).epsilon(1e-10).scale(1e-12));
  }
}

}  // namespace

TEST_CASE("schedules equal PyTorch's StepLR, MultiStepLR, CosineAnnealingLR, PolynomialLR, SequentialLR") {
  // One step per epoch, so epochs are steps as in the PyTorch loop above.
  check_lrs(*make_schedule("step:3:0.5", 1, 12),
            {0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025, 0.025, 0.0125, 0.0125, 0.0125}, 12);
  check_lrs(*make_schedule("multistep:2,5:0.1", 1, 12),
            {0.1, 0.1, 0.01, 0.01, 0.01, 0.001, 0.001, 0.001, 0.001, 0.001, 0.001, 0.001}, 12);
  // PyTorch's cosine restarts after T_max; kiln's stays at the minimum (compared up to T_max).
  check_lrs(*make_schedule("cosine:0.01", 1, 10),
            {0.1, 0.0975772975566, 0.0905463412216, 0.0795953699885, 0.0657963412216, 0.0505, 0.0352036587784,
             0.0214046300115, 0.0104536587784, 0.00342270244339, 0.001},
            11);
  check_lrs(*make_schedule("poly:2", 1, 10), {0.1, 0.081, 0.064, 0.049, 0.036, 0.025, 0.016, 0.009, 0.004, 0.001, 0, 0},
            12);
  check_lrs(*make_schedule("cosine", 1, 12, 3),
            {0.0333333333333, 0.0666666666667, 0.1, 0.1, 0.0969846310393, 0.0883022221559, 0.075, 0.0586824088833,
             0.0413175911167, 0.025, 0.0116977778441, 0.0030153689607},
            12);
}

TEST_CASE("closed forms with steps per epoch, and warm-up composed with each schedule") {
  auto c = make_schedule("constant", 100, 1000);
  CHECK(c->factor(0) == 1);
  CHECK(c->factor(999) == 1);
  auto s = make_schedule("step:30:0.1", 10, 1000);  // every 300 steps
  CHECK(s->factor(299) == 1);
  CHECK(s->factor(300) == doctest::Approx(0.1));
  CHECK(s->factor(600) == doctest::Approx(0.01));
  auto m = make_schedule("multistep:30,60,80:0.1", 5, 1000);  // milestones at 150, 300, 400 steps
  CHECK(m->factor(149) == 1);
  CHECK(m->factor(150) == doctest::Approx(0.1));
  CHECK(m->factor(399) == doctest::Approx(0.01));
  CHECK(m->factor(400) == doctest::Approx(0.001));
  auto cos = make_schedule("cosine", 7, 100);
  CHECK(cos->factor(50) == doctest::Approx(0.5));
  CHECK(cos->factor(100) == doctest::Approx(0.0).scale(1));
  CHECK(cos->factor(250) == doctest::Approx(0.0).scale(1));  // stays at the minimum
  auto p = make_schedule("poly:0.9", 7, 100);
  CHECK(p->factor(40) == doctest::Approx(std::pow(0.6, 0.9)));
  // Goyal et al.: 5 warm-up steps from 1/5 to 1, then the inner schedule counted from the end
  // of the warm-up.
  auto w = make_schedule("multistep:2:0.1", 10, 1000, 5);
  for (int i = 0; i < 5; ++i) CHECK(w->factor(i) == doctest::Approx((i + 1) / 5.0));
  CHECK(w->factor(5) == 1);
  CHECK(w->factor(24) == 1);
  CHECK(w->factor(25) == doctest::Approx(0.1));
  auto wc = make_schedule("cosine:0.1", 10, 105, 5);  // cosine spans steps 5..105
  CHECK(wc->factor(55) == doctest::Approx(0.55));
  CHECK(wc->factor(105) == doctest::Approx(0.1));
  auto wp = make_schedule("poly", 10, 105, 5);
  CHECK(wp->factor(30) == doctest::Approx(0.75));
  CHECK(make_schedule("constant", 1, 10, 4)->factor(1) == doctest::Approx(0.5));
  CHECK(wc->describe() == "linear warm-up over 5 steps, then cosine over 100 steps to factor 0.1");
}

TEST_CASE("bad schedule specs quote the spec") {
  CHECK_THROWS_KILN(make_schedule("expo", 10, 100), "learning-rate schedule 'expo': unknown schedule 'expo'");
  CHECK_THROWS_KILN(make_schedule("step:3", 10, 100), "'step:3': step needs EPOCHS and GAMMA");
  CHECK_THROWS_KILN(make_schedule("step:x:0.1", 10, 100), "'step:x:0.1': bad EPOCHS 'x'");
  CHECK_THROWS_KILN(make_schedule("step:0:0.1", 10, 100), "EPOCHS must be a whole number in [1, 1048576]");
  CHECK_THROWS_KILN(make_schedule("step:3:-1", 10, 100), "GAMMA must be > 0");
  CHECK_THROWS_KILN(make_schedule("multistep:5,3:0.1", 10, 100), "'multistep:5,3:0.1': milestones must increase");
  CHECK_THROWS_KILN(make_schedule("multistep:5,,7:0.1", 10, 100), "bad milestone epoch ''");
  CHECK_THROWS_KILN(make_schedule("cosine:2", 10, 100), "MIN_FACTOR must be in [0, 1]");
  CHECK_THROWS_KILN(make_schedule("cosine", 10, 100, 100), "total_steps (100) must exceed warmup_steps (100)");
  CHECK_THROWS_KILN(make_schedule("poly:1:2", 10, 100), "poly takes at most one argument");
  CHECK_THROWS_KILN(make_schedule("constant:1", 10, 100), "constant takes no arguments");
  CHECK_THROWS_KILN(make_schedule("step:3:0.1", 0, 100), "steps_per_epoch must be > 0");
  CHECK_THROWS_KILN(make_schedule("constant", 10, 100, -1), "warmup_steps must be >= 0");
}
