// Progress line of `kiln bench` sweeps; see progress.h.
#include "bench/harness/progress.h"

#include <unistd.h>

#include "io/logs/progress.h"

namespace kiln::bench {

std::string format_duration(double seconds) { return format_eta(seconds); }

Progress::Progress(const std::vector<RunSpec>& specs, std::FILE* out, int tty)
    : specs_(specs), out_(out), t0_(std::chrono::steady_clock::now()) {
  tty_ = tty < 0 ? (out && isatty(fileno(out))) : tty > 0;
}

Progress::~Progress() { finish(); }

double Progress::work(const RunSpec& s) {
  return double(s.batch) * double(s.iters + s.warmup) * (s.train ? 3.0 : 1.0);
}

std::string Progress::line(size_t index) const {
  double done = 0, left = 0;
  for (size_t i = 0; i < specs_.size(); ++i) (i < index ? done : left) += work(specs_[i]);
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  const RunSpec& s = specs_[index];
  std::string eta = done > 0 ? format_duration(elapsed / done * left) : "--";
  char buf[256];
  std::snprintf(buf, sizeof buf, "run %zu/%zu  %s  batch %lld  %s  ETA %s", index + 1, specs_.size(), s.model.c_str(),
                static_cast<long long>(s.batch), s.train ? "train" : "forward", eta.c_str());
  return buf;
}

void Progress::start(size_t index) {
  if (!out_ || index >= specs_.size()) return;
  const std::string text = line(index);
  if (tty_) {
    // \033[K clears what a longer previous line left behind.
    std::fprintf(out_, "\r%s\033[K", text.c_str());
    shown_ = true;
  } else {
    std::fprintf(out_, "%s\n", text.c_str());
  }
  std::fflush(out_);
}

void Progress::finish() {
  if (out_ && tty_ && shown_) {
    std::fprintf(out_, "\r\033[K");
    std::fflush(out_);
  }
  shown_ = false;
}

}  // namespace kiln::bench
