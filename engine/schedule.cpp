// Learning-rate schedules (engine/schedule.h): spec parsing and the closed forms.
// Test: ctest --test-dir build -R schedule
#include "engine/schedule.h"

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <vector>

#include "engine/error.h"

namespace kiln::optim {

LRSchedule::~LRSchedule() = default;

namespace {

constexpr double kPi = 3.14159265358979323846;

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

std::string fmt_double(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

class Constant final : public LRSchedule {
 public:
  double factor(int64_t) const override { return 1; }
  std::string describe() const override { return "constant"; }
};

// gamma^(number of milestones (in steps) <= step); StepLR is the evenly spaced case.
class Milestones final : public LRSchedule {
 public:
  Milestones(std::vector<int64_t> steps, int64_t every, double gamma, std::string desc)
      : steps_(std::move(steps)), every_(every), gamma_(gamma), desc_(std::move(desc)) {}
  double factor(int64_t s) const override {
    int64_t k = 0;
    if (every_ > 0) {
      k = s / every_;
    } else {
      for (int64_t m : steps_) k += m <= s;
    }
    return std::pow(gamma_, double(k));
  }
  std::string describe() const override { return desc_; }

 private:
  std::vector<int64_t> steps_;
  int64_t every_;
  double gamma_;
  std::string desc_;
};

class Cosine final : public LRSchedule {
 public:
  Cosine(int64_t total, double min) : total_(total), min_(min) {}
  double factor(int64_t s) const override {
    const double t = double(std::min(std::max<int64_t>(s, 0), total_));
    return min_ + (1 - min_) * (1 + std::cos(kPi * t / double(total_))) / 2;
  }
  std::string describe() const override {
    return "cosine over " + std::to_string(total_) + " steps to factor " + fmt_double(min_);
  }

 private:
  int64_t total_;
  double min_;
};

class Poly final : public LRSchedule {
 public:
  Poly(int64_t total, double power) : total_(total), power_(power) {}
  double factor(int64_t s) const override {
    const double t = double(std::min(std::max<int64_t>(s, 0), total_));
    return std::pow(1 - t / double(total_), power_);
  }
  std::string describe() const override {
    return "poly over " + std::to_string(total_) + " steps, power " + fmt_double(power_);
  }

 private:
  int64_t total_;
  double power_;
};

class Warmup final : public LRSchedule {
 public:
  Warmup(int64_t warmup, std::unique_ptr<LRSchedule> inner) : warmup_(warmup), inner_(std::move(inner)) {}
  double factor(int64_t s) const override {
    if (s < warmup_) return double(std::max<int64_t>(s, 0) + 1) / double(warmup_);
    return inner_->factor(s - warmup_);
  }
  std::string describe() const override {
    return "linear warm-up over " + std::to_string(warmup_) + " steps, then " + inner_->describe();
  }

 private:
  int64_t warmup_;
  std::unique_ptr<LRSchedule> inner_;
};

}  // namespace

std::unique_ptr<LRSchedule> make_schedule(const std::string& spec, int64_t steps_per_epoch, int64_t total_steps,
                                          int64_t warmup_steps) {
  auto bad = [&](const std::string& why) -> std::string {
    return "learning-rate schedule '" + spec + "': " + why +
           " (expected constant | step:EPOCHS:GAMMA | multistep:E1,E2,...:GAMMA | cosine[:MIN_FACTOR] | "
           "poly[:POWER])";
  };
  auto number = [&](const std::string& s, const char* what) {
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    KILN_CHECK(!s.empty() && end && *end == '\0' && std::isfinite(v), bad(std::string("bad ") + what + " '" + s + "'"));
    return v;
  };
  auto integer = [&](const std::string& s, const char* what) {
    const double v = number(s, what);
    // Epoch counts past 2^20 are typos; larger ones would overflow int64 once multiplied by steps per epoch.
    KILN_CHECK(v == std::floor(v) && v > 0 && v <= double(1 << 20),
               bad(std::string(what) + " must be a whole number in [1, 1048576], got '" + s + "'"));
    return int64_t(v);
  };
  KILN_CHECK(warmup_steps >= 0, bad("warmup_steps must be >= 0, got " + std::to_string(warmup_steps)));
  const std::vector<std::string> parts = split(spec, ':');
  const std::string& kind = parts[0];
  const int64_t inner_total = total_steps - warmup_steps;
  std::unique_ptr<LRSchedule> s;
  if (kind == "constant") {
    KILN_CHECK(parts.size() == 1, bad("constant takes no arguments"));
    s = std::make_unique<Constant>();
  } else if (kind == "step" || kind == "multistep") {
    KILN_CHECK(parts.size() == 3, bad(kind + " needs " + (kind == "step" ? "EPOCHS" : "E1,E2,...") + " and GAMMA"));
    KILN_CHECK(steps_per_epoch > 0, bad("steps_per_epoch must be > 0, got " + std::to_string(steps_per_epoch)));
    const double gamma = number(parts[2], "GAMMA");
    KILN_CHECK(gamma > 0, bad("GAMMA must be > 0"));
    if (kind == "step") {
      const int64_t every = integer(parts[1], "EPOCHS") * steps_per_epoch;
      s = std::make_unique<Milestones>(std::vector<int64_t>{}, every,  gamma,
                                       "step: x" + fmt_double(gamma) + " every " + parts[1] + " epochs");
    } else {
      std::vector<int64_t> steps;
      for (const std::string& e : split(parts[1], ',')) {
        const int64_t epoch = integer(e, "milestone epoch");
        KILN_CHECK(steps.empty() || epoch * steps_per_epoch > steps.back(), bad("milestones must increase"));
        steps.push_back(epoch * steps_per_epoch);
      }
      s = std::make_unique<Milestones>(steps, 0, gamma,
                                       "multistep: x" + fmt_double(gamma) + " at epochs " + parts[1]);
    }
  } else if (kind == "cosine" || kind == "poly") {
    KILN_CHECK(parts.size() <= 2, bad(kind + " takes at most one argument"));
    KILN_CHECK(inner_total > 0, bad("total_steps (" + std::to_string(total_steps) + ") must exceed warmup_steps (" +
                                    std::to_string(warmup_steps) + ")"));
    if (kind == "cosine") {
      const double min = parts.size() == 2 ? number(parts[1], "MIN_FACTOR") : 0.0;
      KILN_CHECK(min >= 0 && min <= 1, bad("MIN_FACTOR must be in [0, 1]"));
      s = std::make_unique<Cosine>(inner_total, min);
    } else {
      const double power = parts.size() == 2 ? number(parts[1], "POWER") : 1.0;
      KILN_CHECK(power >= 0, bad("POWER must be >= 0"));
      s = std::make_unique<Poly>(inner_total, power);
    }
  } else {
    KILN_THROW(bad("unknown schedule '" + kind + "'"));
  }
  if (warmup_steps > 0) s = std::make_unique<Warmup>(warmup_steps, std::move(s));
  return s;
}

}  // namespace kiln::optim
