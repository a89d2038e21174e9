// The communication thread (FIFO order, sticky errors) and the Chrome-trace timeline.
//   ctest --test-dir build -R "comm_thread"
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <vector>

#include "dist/comm_thread.h"
#include "dist/timeline.h"
#include "engine/error.h"
#include "tests/support/testing.h"

using namespace kiln;

TEST_CASE("comm thread: tasks run in submission order, off the calling thread") {
  dist::CommThread t;
  std::vector<int> order;
  std::vector<dist::CommThread::Handle> hs;
  const auto caller = std::this_thread::get_id();
  std::atomic<bool> other_thread{true};
  for (int i = 0; i < 20; ++i)
    hs.push_back(t.submit("task", [&, i] {
      if (std::this_thread::get_id() == caller) other_thread = false;
      if (i == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      order.push_back(i);
    }));
  for (auto& h : hs) h.wait();
  REQUIRE(order.size() == 20);
  for (int i = 0; i < 20; ++i) CHECK(order[size_t(i)] == i);
  CHECK(other_thread);
}

TEST_CASE("comm thread: an error is rethrown by wait() and sticks to later tasks") {
  dist::CommThread t;
  bool later_ran = false;
  auto bad = t.submit("bad", [] { KILN_THROW("rank 3 timed out"); });
  auto later = t.submit("later", [&] { later_ran = true; });
  CHECK_THROWS_WITH_AS(bad.wait(), doctest::Contains("rank 3 timed out"), Error);
  CHECK_THROWS_WITH_AS(later.wait(), doctest::Contains("rank 3 timed out"), Error);
  CHECK_FALSE(later_ran);
  CHECK_THROWS_AS(t.run("again", [] {}), Error);
}

TEST_CASE("comm thread: destruction runs what is queued") {
  std::atomic<int> n{0};
  {
    dist::CommThread t;
    for (int i = 0; i < 5; ++i) t.submit("inc", [&] { ++n; });
  }
  CHECK(n == 5);
}

TEST_CASE("timeline: per-rank file names") {
  CHECK(dist::timeline::rank_path("trace.json", 1, 4) == "trace.rank1.json");
  CHECK(dist::timeline::rank_path("out/trace.json", 0, 1) == "out/trace.json");
  CHECK(dist::timeline::rank_path("dir.d/trace", 2, 3) == "dir.d/trace.rank2");
}

TEST_CASE("timeline: spans of two threads as Chrome-trace complete events") {
  test::TempDir dir("timeline");
  const std::string path = (dir.path / "trace.json").string();
  CHECK_FALSE(dist::timeline::enabled());
  { dist::timeline::Span ignored("compute", "before start"); }
  dist::timeline::start(path, 2, 4);
  CHECK(dist::timeline::enabled());
  dist::timeline::set_thread_name("main");
  // The span lies inside what this thread measures around it, in microseconds.
  const auto outer0 = std::chrono::steady_clock::now();
  {
    dist::timeline::Span s("compute", "forward");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const double outer_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - outer0).count();
  {
    dist::CommThread t;
    t.run("allreduce bucket 0", [] { std::this_thread::sleep_for(std::chrono::milliseconds(3)); });
  }
  const std::string written = dist::timeline::stop();
  CHECK(written == (dir.path / "trace.rank2.json").string());
  CHECK_FALSE(dist::timeline::enabled());
  std::ifstream in(written);
  auto doc = nlohmann::json::parse(in);
  int spans = 0;
  double forward_dur = 0;
  std::set<int> tids;
  bool comm_named = false;
  for (const auto& e : doc.at("traceEvents")) {
    CHECK(e.at("pid") == 2);
    if (e.at("ph") == "M") {
      if (e.at("name") == "thread_name" && e.at("args").at("name") == "communication") comm_named = true;
      continue;
    }
    CHECK(e.at("ph") == "X");
    CHECK(e.at("name") != "before start");
    ++spans;
    tids.insert(e.at("tid").get<int>());
    if (e.at("name") == "forward") forward_dur = e.at("dur").get<double>();
  }
  CHECK(spans == 2);
  CHECK(tids.size() == 2);
  CHECK(comm_named);
  CHECK(forward_dur >= 5000);
  CHECK(forward_dur <= outer_us);
}
