// Learning-rate schedules as pure functions of the optimizer step, so a resumed run needs only
// the step: lr(step) = base_lr * factor(step), step = optimizer steps done before this one (0 for
// the first update).
//   auto s = optim::make_schedule("multistep:30,60,80:0.1", steps_per_epoch, total_steps, warmup);
//   opt->set_lr(base_lr * s->factor(opt->steps())); opt->step();
// Test: ctest --test-dir build -R schedule
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace kiln::optim {

class LRSchedule {
 public:
  virtual ~LRSchedule();
  virtual double factor(int64_t step) const = 0;
  virtual std::string describe() const = 0;
};

// spec (closed forms of the PyTorch schedulers; s = step, E = steps_per_epoch, T = total steps
// of the schedule):
//   constant                 1
//   step:EPOCHS:GAMMA        GAMMA^floor(s / (EPOCHS E))                   (StepLR)
//   multistep:E1,E2,..:GAMMA GAMMA^(number of Ei with Ei E <= s)          (MultiStepLR)
//   cosine | cosine:MIN      MIN + (1 - MIN) (1 + cos(pi min(s, T) / T)) / 2, MIN = 0 by default
//                            (CosineAnnealingLR with eta_min = MIN base_lr, T_max = T)
//   poly | poly:POWER        (1 - min(s, T) / T)^POWER, POWER = 1 by default (PolynomialLR)
// Warm-up (warmup_steps W > 0, Goyal et al. 2017) follows torch.optim.lr_scheduler.SequentialLR
// as torchvision's reference scripts use it: for s < W the factor ramps linearly,
// (s + 1) / W (LinearLR with start_factor 1/W over W - 1 steps, reaching 1 at s = W - 1); from
// s = W on the inner schedule runs on s - W, so its epochs count from the end of the warm-up and
// cosine and poly span T = total_steps - W, ending exactly at total_steps.
// Bad specs (unknown name, malformed number, epochs <= 0, gamma <= 0, non-increasing milestones,
// MIN outside [0, 1], POWER < 0, steps_per_epoch <= 0, total_steps <= warmup_steps for cosine and
// poly, warmup_steps < 0) -> kiln::Error quoting the spec.
std::unique_ptr<LRSchedule> make_schedule(const std::string& spec, int64_t steps_per_epoch, int64_t total_steps,
                                          int64_t warmup_steps = 0);

}  // namespace kiln::optim
