// What the Trainer's source files share and its header does not show: the state that lives only
// while fit() runs (the epoch's loader, the log writers, the logged window).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "io/data/dataloader.h"
#include "io/logs/csv_log.h"
#include "io/logs/tfevents.h"
#include "train/trainer.h"

namespace kiln::train {

using Clock = std::chrono::steady_clock;

struct Trainer::State {
  std::unique_ptr<DataLoader> loader;
  std::unique_ptr<EventWriter> events;
  std::unique_ptr<CsvLog> steps_csv, epochs_csv, ranks_csv;
  // Since the last log point: the last step's loss x samples, correct and samples; all images.
  struct Window {
    double loss = 0, correct = 0, samples = 0, images = 0;
  } window;
  Clock::time_point window_t0;
  int64_t per_epoch = 1;
};

// Creates `dir` (and its parents); a failure is a kiln::Error naming the flag and the folder.
void make_dir(const std::string& dir, const char* flag);

}  // namespace kiln::train
