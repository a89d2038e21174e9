// Training progress bar; see io/logs/progress.h.
//   ctest --test-dir build -R io.test_logs
#include "io/logs/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace kiln {
namespace {

constexpr int kBarWidth = 24;

std::string format_value(const std::string& name, double v) {
  char buf[64];
  if (!std::isfinite(v))
    std::snprintf(buf, sizeof buf, "%g", v);
  else if (std::fabs(v) >= 1000)
    std::snprintf(buf, sizeof buf, "%.0f", v);  // rates and counts: no false precision
  else if (std::fabs(v) >= 100)
    std::snprintf(buf, sizeof buf, "%.1f", v);
  else if (std::fabs(v) >= 1e-3)
    std::snprintf(buf, sizeof buf, "%.4f", v);
  else
    std::snprintf(buf, sizeof buf, "%.3e", v);  // learning rates
  return name + " " + buf;
}

}  // namespace

std::string format_eta(double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) return "?";
  long s = std::lround(seconds);
  char buf[32];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%lds", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
  return buf;
}

bool is_terminal(int fd) { return ::isatty(fd) == 1; }

ProgressBar::ProgressBar(std::string label, int64_t total_steps, std::ostream& os, bool interactive,
                         int every_percent)
    : label_(std::move(label)),
      total_(total_steps),
      os_(os),
      interactive_(interactive),
      every_percent_(every_percent < 1 ? 1 : every_percent),
      t0_(std::chrono::steady_clock::now()) {}

std::string ProgressBar::line(int64_t step, const NamedValues& values, double elapsed_s, bool done) const {
  std::string s = label_;
  const std::string tot = total_ > 0 ? std::to_string(total_) : "?";
  std::string count = std::to_string(step);
  if (count.size() < tot.size()) count.insert(0, tot.size() - count.size(), ' ');
  if (total_ > 0) {
    const double frac = std::min(1.0, std::max(0.0, double(step) / double(total_)));
    const int fill = int(frac * kBarWidth);
    std::string bar(kBarWidth, ' ');
    for (int i = 0; i < fill; ++i) bar[i] = '=';
    if (fill < kBarWidth && step > 0) bar[fill] = '>';
    s += (s.empty() ? "[" : "  [") + bar + "]";
  }
  s += "  " + count + "/" + tot;
  for (auto& [name, v] : values) s += "  " + format_value(name, v);
  if (done)
    s += "  in " + format_eta(elapsed_s);
  else if (total_ > 0 && step > 0)
    s += "  ETA " + format_eta(elapsed_s / double(step) * double(total_ - step));
  else
    s += "  ETA ?";
  return s;
}

void ProgressBar::update(int64_t step, const NamedValues& values) {
  last_step_ = step;
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - t0_).count();
  if (interactive_) {
    // Redrawing costs a write(2) per step; ten a second is all a person can read.
    if (drawn_ && now - last_draw_ < std::chrono::milliseconds(100) && step != total_) return;
    std::string l = line(step, values, elapsed);
    const size_t width = l.size();
    if (width < last_width_) l.append(last_width_ - width, ' ');  // erase the longer previous line
    last_width_ = width;
    os_ << '\r' << l << std::flush;
    drawn_ = true;
    last_draw_ = now;
    return;
  }
  if (total_ <= 0) return;
  const int bucket = int(step * 100 / total_) / every_percent_;
  if (bucket <= last_bucket_) return;
  last_bucket_ = bucket;
  os_ << line(step, values, elapsed) << '\n' << std::flush;
}

void ProgressBar::finish(const NamedValues& values) {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  std::string l = line(last_step_, values, elapsed, true);
  if (interactive_) {
    if (l.size() < last_width_) l.append(last_width_ - l.size(), ' ');
    os_ << '\r' << l << '\n' << std::flush;
  } else {
    os_ << l << '\n' << std::flush;
  }
  drawn_ = false;
}

}  // namespace kiln
