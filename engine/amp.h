// Mixed precision's loss scaling, with torch.cuda.amp.GradScaler's semantics (PyTorch 1.13):
// float16 gradients underflow below 6e-8, so the loss is multiplied by a large scale before
// backward and the float32 master gradients divided by it before the update. A step whose
// gradients hold an inf or NaN is skipped and the scale backs off; after `growth_interval`
// clean steps in a row the scale grows. bfloat16 has float32's exponent range and needs none.
//   amp::GradScaler scaler;
//   scaler.scale(loss).backward();
//   scaler.unscale(opt);                       // optional: before clipping
//   optim::clip_grad_norm(opt.params(), 5.0);
//   scaler.step(opt);                          // skipped when a gradient is not finite
//   scaler.update();
// Not thread-safe: one scaler per training loop. Test: ctest --test-dir build -R amp
#pragma once

#include <cstdint>
#include <string>

#include "engine/optim.h"
#include "engine/tensor.h"

namespace kiln::amp {

struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16, PyTorch's default
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  bool enabled = true;  // disabled: scale() and unscale() are identities, step() always steps
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions o = {});

  // loss * scale, in the loss's dtype (a float32 loss keeps its precision).
  Tensor scale(const Tensor& loss) const;
  // Divides every defined gradient of the optimizer's parameters by the scale, in place, and
  // records whether all of them are finite. Once per step: a second call before update() throws.
  void unscale(optim::Optimizer& opt);
  // Unscales (if not done yet this step), then runs opt.step() unless a gradient was inf or NaN.
  // Returns whether the optimizer stepped.
  bool step(optim::Optimizer& opt);
  // Backs the scale off after a skipped step, grows it after growth_interval clean ones.
  void update();

  double get_scale() const { return scale_; }
  bool enabled() const { return opts_.enabled; }
  int64_t growth_tracker() const { return growth_tracker_; }
  bool found_inf() const { return found_inf_; }  // of the last unscale
  // {"scale", "growth_tracker", options}: what a resumed run needs.
  std::string state_json() const;
  void load_state(const std::string& json);

 private:
  GradScalerOptions opts_;
  double scale_;
  int64_t growth_tracker_ = 0;
  bool unscaled_ = false;
  bool found_inf_ = false;
};

}  // namespace kiln::amp
