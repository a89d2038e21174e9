// Training runs that stop and resume: a run stopped by max_steps, or by SIGTERM or SIGUSR1 sent
// to a `kiln train` process, and resumed with --resume latest in a new process, repeats the
// uninterrupted run bit for bit (every step's loss, the final weights and optimizer state, the
// test line); the signal handler ends the step, checkpoints and is removed after fit(); and a
// small segmentation net learns masks. Synthetic data (learnable classes), so nothing is
// skipped. Fashion-MNIST: test_train_fashion.cpp; TensorBoard's reader: test_train_tensorboard.cpp.
//   ctest --test-dir build -R e2e.test_train
#include "tests/support/testing.h"
#include "tests/e2e/train_testing.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "engine/ops/elementwise.h"
#include "engine/ops/pool.h"
#include "engine/random.h"
#include "io/formats/checkpoint.h"
#include "io/data/datasets.h"
#include "io/data/synthetic.h"
#include "layers/activation.h"
#include "layers/conv.h"
#include "nets/zoo.h"
#include "train/trainer.h"

extern char** environ;

using namespace kiln;
namespace fs = std::filesystem;

namespace {

// 640 training images of 10 classes, each class a brighter band of rows: mnist-cnn learns it.
const char* kData = "synthetic:1x28x28:10:640:learnable";


bool same_bits(const NamedTensors& a, const NamedTensors& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const Tensor x = a[i].second.contiguous(), y = b[i].second.contiguous();
    if (a[i].first != b[i].first || x.dtype() != y.dtype() || x.sizes() != y.sizes()) return false;
    if (std::memcmp(x.data_ptr(), y.data_ptr(), size_t(x.numel()) * x.element_size()) != 0) return false;
  }
  return true;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// ---- `kiln train` as a child process --------------------------------------------------------

// The arguments every run of the subprocess test shares: 2 epochs of 16 steps, Adam with a cosine
// schedule and warm-up (step-dependent state), 1 loader worker prefetching, every step logged.
const std::vector<std::string> kTrainArgs = {
    "train", "--model", "mnist-cnn", "--data", "synthetic:1x28x28:10:512:learnable", "--epochs", "2",
    "--batch", "32", "--optimizer", "adam", "--lr", "2e-3", "--schedule", "cosine", "--warmup", "0.25",
    "--seed", "7", "--workers", "1", "--threads", "1", "--log-every", "1", "--quiet"};
constexpr int kSteps = 32;

// Starts KILN_CLI with `args`, stdout and stderr to files in `dir`; returns its pid.
pid_t spawn_kiln(std::vector<std::string> args, const fs::path& dir, const std::string& tag) {
  args.insert(args.begin(), KILN_CLI);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  const std::string out = (dir / (tag + ".out")).string(), err = (dir / (tag + ".err")).string();
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  REQUIRE_MESSAGE(rc == 0, "posix_spawn ", KILN_CLI, ": ", std::strerror(rc));
  return pid;
}

// waitpid's status as text and whether it is a clean exit 0.
bool exited_ok(int status, std::string* how) {
  if (WIFEXITED(status)) *how = "exit " + std::to_string(WEXITSTATUS(status));
  else if (WIFSIGNALED(status)) *how = "killed by signal " + std::to_string(WTERMSIG(status));
  else *how = "status " + std::to_string(status);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// Runs kiln to the end; its stdout. The test fails with stderr if it does not exit 0.
std::string run_kiln(const std::vector<std::string>& args, const fs::path& dir, const std::string& tag) {
  const pid_t pid = spawn_kiln(args, dir, tag);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  std::string how;
  REQUIRE_MESSAGE(exited_ok(status, &how), "kiln ", tag, ": ", how, "\n", slurp(dir / (tag + ".err")));
  return slurp(dir / (tag + ".out"));
}

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// train.csv: step -> loss as written (shortest round-trip text of the float: equal text is
// equal bits); each step must appear once, in order.
std::vector<std::string> csv_losses(const fs::path& csv) {
  std::ifstream in(csv);
  std::string line;
  REQUIRE(std::getline(in, line));
  REQUIRE(line.rfind("step,epoch,loss,", 0) == 0);
  std::vector<std::string> losses;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
    REQUIRE(f.size() >= 3);
    CHECK_MESSAGE(std::stoll(f[0]) == int64_t(losses.size()) + 1, "train.csv row ", losses.size() + 1, ": ", line);
    losses.push_back(f[2]);
  }
  return losses;
}

size_t csv_rows(const fs::path& csv) {
  std::ifstream in(csv);
  size_t rows = 0;
  for (std::string line; std::getline(in, line);) ++rows;
  return rows == 0 ? 0 : rows - 1;  // the header
}

// The test line `kiln train` prints at the end ("test: loss ... top-1 ... top-5 ...").
std::string test_line(const std::string& out) {
  std::smatch m;
  REQUIRE_MESSAGE(std::regex_search(out, m, std::regex("test: loss [^\n]*")), "no test line in:\n", out);
  return m.str();
}

// A checkpoint set's weights and optimizer state.
Checkpoint final_checkpoint(const fs::path& dir) {
  const std::string latest = latest_checkpoint(dir.string());
  REQUIRE_MESSAGE(!latest.empty(), "no checkpoint in ", dir);
  Checkpoint c = load_checkpoint(latest);
  CHECK(nlohmann::json::parse(c.state_json)["step"] == kSteps);
  return c;
}

}  // namespace

TEST_CASE("a run stopped at max_steps and resumed equals the uninterrupted run bit for bit") {
  Splits data = open_dataset_dir(kData);
  test::TempDir full_tmp("e2e_full"), part_tmp("e2e_part");
  const fs::path &full_dir = full_tmp.path, &part_dir = part_tmp.path;

  train::Trainer full(test::fresh_mnist_cnn(3), data, test::small_train_config(full_dir));
  full.fit();
  REQUIRE(full.step_losses().size() == 20);

  // Stop after 13 steps (mid-epoch 2), then resume in a fresh process-like setup.
  train::TrainConfig c1 = test::small_train_config(part_dir);
  c1.max_steps = 13;
  train::Trainer first(test::fresh_mnist_cnn(3), data, c1);
  first.fit();
  CHECK(first.interrupted());
  CHECK(first.step() == 13);
  REQUIRE(!first.last_checkpoint().empty());

  manual_seed(12345);  // whatever state the new process starts in; the checkpoint restores it
  train::TrainConfig c2 = test::small_train_config(part_dir);
  c2.resume = "latest";
  train::Trainer second(test::fresh_mnist_cnn(99), data, c2);  // other initial weights: overwritten
  second.fit();
  CHECK(!second.interrupted());
  REQUIRE(second.step_losses().size() == 7);

  std::vector<float> joined = first.step_losses();
  joined.insert(joined.end(), second.step_losses().begin(), second.step_losses().end());
  CHECK(joined == full.step_losses());
  CHECK(same_bits(second.model().state_dict(), full.model().state_dict()));
  REQUIRE(second.history().size() == 1);  // epoch 2 finished by the resumed run
  CHECK(second.history()[0].train_loss == full.history()[1].train_loss);
  CHECK(second.history()[0].val.top1 == full.history()[1].val.top1);

  // The CSV of the interrupted-then-resumed run has every step once, in order.
  std::ifstream csv(part_dir / "train.csv");
  std::string line;
  std::getline(csv, line);
  CHECK(line.rfind("step,", 0) == 0);
  int64_t rows = 0, last = 0;
  while (std::getline(csv, line)) {
    ++rows;
    last = std::stoll(line.substr(0, line.find(',')));
  }
  CHECK(rows == 20);
  CHECK(last == 20);
}

TEST_CASE("--keep N counts every checkpoint in the directory, whatever run wrote it") {
  Splits data = open_dataset_dir(kData);
  test::TempDir tmp("e2e_keep");
  const std::string dir = tmp.path.string();
  train::TrainConfig c1 = test::small_train_config(tmp.path);
  c1.checkpoint_every = 2;
  c1.keep_checkpoints = 0;  // all
  c1.max_steps = 7;         // steps 2, 4, 6 and the stop at 7
  train::Trainer first(test::fresh_mnist_cnn(3), data, c1);
  first.fit();
  CHECK(list_checkpoints(dir).size() == 4);

  // A new run (not a resume) in the same directory keeps the newest two of all of them: its own.
  train::TrainConfig c2 = test::small_train_config(tmp.path);
  c2.checkpoint_every = 3;
  c2.keep_checkpoints = 2;
  c2.max_steps = 5;  // step 3 and the stop at 5
  train::Trainer second(test::fresh_mnist_cnn(4), data, c2);
  second.fit();
  const std::vector<std::string> left = list_checkpoints(dir);
  REQUIRE(left.size() == 2);
  CHECK(fs::path(left[0]).filename() == "ckpt-00000003.json");
  CHECK(fs::path(left[1]).filename() == "ckpt-00000005.json");
  int tensor_files = 0;
  for (const auto& e : fs::directory_iterator(tmp.path))
    tensor_files += e.path().extension() == ".safetensors";
  CHECK(tensor_files == 4);  // two sets of weights + optimizer state; the pruned sets left nothing
  CHECK(latest_checkpoint(dir) == left[1]);
}

TEST_CASE("Trainer::test: the last validation where it covered the whole test split at the final step, else an evaluation") {
  Splits data = open_dataset_dir(kData);  // 640 training samples, 64 test samples
  test::TempDir tmp("e2e_test_split");
  const auto same = [](const train::EvalResult& a, const train::EvalResult& b) {
    return a.samples == b.samples && a.loss == b.loss && a.top1 == b.top1 && a.top5 == b.top5;
  };

  // Validated on the whole test split after the last step: that result, the same bits as an evaluation.
  train::TrainConfig c = test::small_train_config(tmp.path);
  c.epochs = 1;
  c.limit_test = 0;
  train::Trainer whole(test::fresh_mnist_cnn(3), data, c);
  whole.fit();
  REQUIRE(whole.history().size() == 1);
  REQUIRE(whole.history()[0].val.samples == 64);
  const train::EvalResult evaluated = whole.evaluate(*data.test);
  CHECK(std::isfinite(evaluated.loss));
  CHECK(same(whole.test(), evaluated));

  // Validated on part of it (--limit-test): the whole split is evaluated.
  c.limit_test = 32;
  train::Trainer part(test::fresh_mnist_cnn(3), data, c);
  part.fit();
  REQUIRE(part.history()[0].val.samples == 32);
  const train::EvalResult tested = part.test();
  CHECK(tested.samples == 64);
  CHECK(same(tested, part.evaluate(*data.test)));

  // Stopped at step 13 of 20: epoch 1 validated at step 10, three steps ago: evaluated again.
  c.epochs = 2;
  c.limit_test = 0;
  c.max_steps = 13;
  train::Trainer stopped(test::fresh_mnist_cnn(3), data, c);
  stopped.fit();
  REQUIRE(stopped.history().size() == 1);
  const train::EvalResult now = stopped.test();
  CHECK(same(now, stopped.evaluate(*data.test)));
  CHECK(now.loss != stopped.history()[0].val.loss);
}

TEST_CASE("mixed precision: bfloat16 and float16 (loss scaling) steps learn like float32") {
  // The trainer's half-precision paths on a small learnable set: what the sanitizer build runs of
  // them (e2e.test_train_fashion measures their accuracy on Fashion-MNIST in the default build).
  Splits data = open_dataset_dir(kData);
  const DType dtypes[3] = {DType::float32, DType::bfloat16, DType::float16};
  double top1[3] = {0, 0, 0}, loss[3] = {0, 0, 0};
  for (int i = 0; i < 3; ++i) {
    CAPTURE(i);
    train::TrainConfig c = test::small_train_config(fs::temp_directory_path());
    c.logdir.clear();
    c.epochs = 1;
    c.compute_dtype = dtypes[i];
    train::Trainer t(test::fresh_mnist_cnn(3), data, c);
    t.fit();
    REQUIRE(t.history().size() == 1);
    const std::vector<float>& steps = t.step_losses();
    REQUIRE(steps.size() == 10);
    for (float l : steps) CHECK(std::isfinite(l));
    CHECK(steps.back() < steps.front());
    top1[i] = t.history()[0].val.top1;
    loss[i] = t.history()[0].val.loss;
  }
  MESSAGE("top-1 float32 ", top1[0], " bfloat16 ", top1[1], " float16 ", top1[2], "; loss ", loss[0], " ",
          loss[1], " ", loss[2]);
  CHECK(top1[0] > 0.9);
  for (int i = 1; i < 3; ++i) {
    CAPTURE(i);
    CHECK(top1[i] > 0.9);
    CHECK(std::abs(loss[i] - loss[0]) < 0.1);
  }
}

TEST_CASE("SIGUSR1 (SLURM's warning) ends the step, writes a checkpoint and restores the old handler") {
  Splits data = open_dataset_dir(kData);
  test::TempDir dir_tmp("e2e_signal");
  const fs::path& dir = dir_tmp.path;
  train::TrainConfig c = test::small_train_config(dir);
  ModulePtr m = test::fresh_mnist_cnn(4);
  // Raise the signal from inside the 4th backward pass: the handler only sets a flag, the
  // trainer finishes the step and stops.
  int calls = 0;
  Tensor w = m->named_parameters().front().second;
  w.register_post_accumulate_grad_hook([&](Tensor&) {
    if (++calls == 4) std::raise(SIGUSR1);
  });
  train::Trainer t(m, data, c);
  t.fit();
  CHECK(t.interrupted());
  CHECK(t.step() == 4);
  REQUIRE(!t.last_checkpoint().empty());
  Checkpoint ck = load_checkpoint(t.last_checkpoint());
  auto j = nlohmann::json::parse(ck.state_json);
  CHECK(j["step"] == 4);
  // The handler is gone after fit(): the default action is back.
  struct sigaction now = {};
  sigaction(SIGUSR1, nullptr, &now);
  const bool restored = now.sa_handler == SIG_DFL;
  CHECK(restored);
}

TEST_CASE("kiln train stopped by SIGTERM or SIGUSR1 and resumed in a new process equals the uninterrupted run") {
  test::TempDir tmp("e2e_signal_resume");
  const fs::path full = tmp.path / "full";
  fs::create_directories(full);
  const std::string full_out = run_kiln(with(kTrainArgs, {"--logdir", full.string()}), full, "full");
  const std::vector<std::string> want = csv_losses(full / "train.csv");
  REQUIRE(want.size() == size_t(kSteps));
  const Checkpoint want_ck = final_checkpoint(full);

  for (int sig : {SIGTERM, SIGUSR1}) {
    CAPTURE(sig);
    const fs::path dir = tmp.path / ("sig" + std::to_string(sig));
    fs::create_directories(dir);
    const std::vector<std::string> args = with(kTrainArgs, {"--logdir", dir.string()});
    const pid_t pid = spawn_kiln(args, dir, "first");
    // Signal once a few steps are logged (train.csv is flushed per row): mid-epoch 1, far from
    // the end, so the run is certainly still training when the signal lands.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    int status = 0;
    bool ended = false;
    while (csv_rows(dir / "train.csv") < 3) {
      if (waitpid(pid, &status, WNOHANG) == pid) {
        ended = true;
        break;
      }
      REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline, "no step logged in 120 s");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    REQUIRE_MESSAGE(!ended, "kiln ended before the signal:\n", slurp(dir / "first.err"));
    REQUIRE(::kill(pid, sig) == 0);
    REQUIRE(waitpid(pid, &status, 0) == pid);
    std::string how;
    REQUIRE_MESSAGE(exited_ok(status, &how), "the signalled run: ", how, "\n", slurp(dir / "first.err"));

    // It stopped after a whole step, mid-run, and said where it checkpointed.
    const std::string out = slurp(dir / "first.out"), err = slurp(dir / "first.err");
    std::smatch m;
    REQUIRE_MESSAGE(std::regex_search(out, m, std::regex("stopped at step ([0-9]+); resume with --resume (\\S+)")),
                    out);
    const int stopped = std::stoi(m[1]);
    const std::string ckpt = m[2];
    MESSAGE("signal ", sig, ": stopped at step ", stopped, " of ", kSteps);
    CHECK(stopped >= 3);
    CHECK(stopped < kSteps);
    CHECK(fs::exists(ckpt + ".safetensors"));
    CHECK_MESSAGE(err.find("kiln train: signal " + std::to_string(sig) + " at step " + std::to_string(stopped) +
                           ", checkpoint ") != std::string::npos,
                  err);
    CHECK(out.find("test: loss") == std::string::npos);  // no evaluation after a stop
    CHECK(csv_rows(dir / "train.csv") == size_t(stopped));

    // A new process resumes from the newest checkpoint and finishes the run.
    const std::string resumed_out = run_kiln(with(args, {"--resume", "latest"}), dir, "resumed");
    const std::vector<std::string> got = csv_losses(dir / "train.csv");
    CHECK(got.size() == want.size());
    CHECK(got == want);  // every step's loss, bit for bit
    const Checkpoint ck = final_checkpoint(dir);
    CHECK(same_bits(ck.weights, want_ck.weights));
    CHECK(same_bits(ck.optimizer, want_ck.optimizer));
    CHECK(test_line(resumed_out) == test_line(full_out));
  }
}

TEST_CASE("segmentation: a small conv net learns masks (BCE with logits, IoU and Dice)") {
  // Masks are the pixels brighter than their 3x3 neighbourhood's mean: learnable by two convs.
  Tensor x = test::make_input({96, 1, 12, 12}, 31, DType::float32);
  Tensor mean = ops::avg_pool2d(x, {3, 3}, {1, 1}, {1, 1});
  Tensor mask = ops::gt(x, mean).to(DType::float32);
  auto set = std::make_shared<TensorDataset>(x, mask);
  Splits data;
  data.train = set;
  data.test = set;
  data.name = "masks";
  data.sample_shape = {1, 12, 12};
  data.classes = 1;
  data.segmentation = true;
  manual_seed(2);
  auto net = make<Sequential>(std::initializer_list<ModulePtr>{make<Conv2d>(1, 8, 3, 1, 1), make<ReLU>(),
                                                               make<Conv2d>(8, 1, 1)});
  test::TempDir dir_tmp("e2e_seg");
  const fs::path& dir = dir_tmp.path;
  train::TrainConfig c;
  c.model_name = "tiny-seg";
  c.epochs = 30;
  c.batch_size = 16;
  c.optimizer.name = "adam";
  c.optimizer.lr = 1e-2;
  c.task = train::Task::segmentation;
  c.progress = false;
  c.epoch_lines = false;
  c.workers = 0;
  train::Trainer t(net, data, c);
  train::EvalResult before = t.evaluate(*set);
  t.fit();
  train::EvalResult after = t.evaluate(*set);
  CHECK(after.loss < before.loss * 0.5);
  CHECK(after.iou > 0.8);
  CHECK(after.dice > 0.88);
  CHECK(after.dice >= after.iou);  // Dice = 2 IoU / (1 + IoU)
}
