// Loss scaling for float16 mixed precision. See amp.h.
#include "engine/amp.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "engine/ops/elementwise.h"
#include "engine/ops/optim.h"

namespace kiln::amp {

GradScaler::GradScaler(GradScalerOptions o) : opts_(o), scale_(o.init_scale) {
  KILN_CHECK(std::isfinite(o.init_scale) && o.init_scale > 0, "GradScaler: init_scale must be finite and > 0, got ",
             o.init_scale);
  KILN_CHECK(o.growth_factor > 1, "GradScaler: growth_factor must be > 1, got ", o.growth_factor);
  KILN_CHECK(o.backoff_factor > 0 && o.backoff_factor < 1, "GradScaler: backoff_factor must be in (0, 1), got ",
             o.backoff_factor);
  KILN_CHECK(o.growth_interval > 0, "GradScaler: growth_interval must be > 0, got ", o.growth_interval);
}

Tensor GradScaler::scale(const Tensor& loss) const {
  KILN_CHECK(loss.defined(), "GradScaler::scale: undefined loss");
  if (!opts_.enabled) return loss;
  return loss * scale_;
}

void GradScaler::unscale(optim::Optimizer& opt) {
  if (!opts_.enabled) return;
  KILN_CHECK(!unscaled_, "GradScaler::unscale: already called since the last update()");
  const double inv = 1.0 / scale_;
  bool finite = true;
  for (const auto& [name, p] : opt.params()) {
    if (!p.defined()) continue;
    Tensor g = p.grad();
    if (!g.defined()) continue;
    KILN_CHECK(g.dtype() == DType::float32 || g.dtype() == DType::float64, "GradScaler::unscale: the gradient of ",
               name, " is ", g.dtype(), "; mixed precision keeps float32 master weights and gradients");
    if (!g.is_contiguous()) {
      g = g.contiguous().clone();
      Tensor mp = p;
      mp.set_grad(g);
    }
    // Squares of finite floats are finite in double, so the sum is finite exactly when every
    // element is: one pass detects inf and NaN.
    if (finite && !std::isfinite(ops::sum_squares(g))) finite = false;
    ops::scale_(g, inv);
  }
  found_inf_ = !finite;
  unscaled_ = true;
}

bool GradScaler::step(optim::Optimizer& opt) {
  if (!opts_.enabled) {
    opt.step();
    return true;
  }
  if (!unscaled_) unscale(opt);
  if (found_inf_) return false;
  opt.step();
  return true;
}

void GradScaler::update() {
  if (!opts_.enabled) return;
  KILN_CHECK(unscaled_, "GradScaler::update: no unscale() or step() since the last update()");
  if (found_inf_) {
    scale_ *= opts_.backoff_factor;
    growth_tracker_ = 0;
  } else if (++growth_tracker_ == opts_.growth_interval) {
    // PyTorch grows only while the result stays finite.
    const double grown = scale_ * opts_.growth_factor;
    if (std::isfinite(float(grown))) scale_ = grown;
    growth_tracker_ = 0;
  }
  unscaled_ = false;
  found_inf_ = false;
}

std::string GradScaler::state_json() const {
  nlohmann::json j;
  j["scale"] = scale_;
  j["growth_tracker"] = growth_tracker_;
  j["growth_factor"] = opts_.growth_factor;
  j["backoff_factor"] = opts_.backoff_factor;
  j["growth_interval"] = opts_.growth_interval;
  j["enabled"] = opts_.enabled;
  return j.dump();
}

void GradScaler::load_state(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
    const double s = j.at("scale").get<double>();
    const int64_t t = j.at("growth_tracker").get<int64_t>();
    KILN_CHECK(std::isfinite(s) && s > 0, "GradScaler::load_state: scale ", s, " is not finite and positive");
    KILN_CHECK(t >= 0, "GradScaler::load_state: growth_tracker ", t, " is negative");
    scale_ = s;
    growth_tracker_ = t;
    opts_.growth_factor = j.value("growth_factor", opts_.growth_factor);
    opts_.backoff_factor = j.value("backoff_factor", opts_.backoff_factor);
    opts_.growth_interval = j.value("growth_interval", opts_.growth_interval);
    opts_.enabled = j.value("enabled", opts_.enabled);
  } catch (const nlohmann::json::exception& e) {
    KILN_THROW("GradScaler::load_state: bad state (", e.what(), "): ", text);
  }
  unscaled_ = false;
  found_inf_ = false;
}

}  // namespace kiln::amp
