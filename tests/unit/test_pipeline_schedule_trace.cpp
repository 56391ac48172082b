// Chrome trace JSON of pipeline timelines.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "parallel/chrome_trace.h"

namespace braid {
namespace {

TEST(ChromeTrace, EventsHaveTheFieldsPerfettoReads) {
  std::vector<TraceEvent> ev = {{"B0", "compute", 30, 20, 1, 0},
                                {"F0", "compute", 0, 10, 1, 0},
                                {"F0", "compute", 0, 10, 0, 0}};
  nlohmann::json j = nlohmann::json::parse(chrome_trace_json(ev));
  const auto& te = j.at("traceEvents");
  ASSERT_EQ(te.size(), 5u);  // two process_name records + three events
  EXPECT_EQ(te[0].at("ph"), "M");
  EXPECT_EQ(te[0].at("args").at("name"), "rank 0");
  EXPECT_EQ(te[1].at("args").at("name"), "rank 1");
  // Sorted by (pid, ts).
  EXPECT_EQ(te[2].at("pid"), 0);
  EXPECT_EQ(te[3].at("name"), "F0");
  EXPECT_EQ(te[3].at("pid"), 1);
  EXPECT_EQ(te[4].at("name"), "B0");
  for (size_t i = 2; i < 5; ++i) {
    EXPECT_EQ(te[i].at("ph"), "X");
    for (const char* k : {"name", "ts", "dur", "pid", "tid", "cat"})
      EXPECT_TRUE(te[i].contains(k)) << k;
  }
  EXPECT_DOUBLE_EQ(te[4].at("dur").get<double>(), 20.0);
}

TEST(ChromeTrace, SimulatedScheduleWritesOneFile) {
  ScheduleSpec spec{ScheduleKind::ZbH1, 2, 3, 1, 0};
  SimResult r = simulate_pipeline(build_pipeline_schedule(spec));
  std::vector<TraceEvent> ev = trace_events(r, 1000.0);
  // 2 stages x 3 micro-batches x (F, B, W); zero-length sends/receives are dropped.
  ASSERT_EQ(ev.size(), 18u);
  auto path = std::filesystem::temp_directory_path() /
              ("braid_trace_" + std::to_string(::getpid()) + ".json");
  write_chrome_trace(path.string(), ev);
  std::ifstream in(path);
  nlohmann::json j = nlohmann::json::parse(in);
  std::filesystem::remove(path);
  double last_end = 0;
  for (const auto& e : j.at("traceEvents"))
    if (e.at("ph") == "X")
      last_end = std::max(last_end, e.at("ts").get<double>() + e.at("dur").get<double>());
  EXPECT_DOUBLE_EQ(last_end, r.makespan * 1000.0);
}

}  // namespace
}  // namespace braid
