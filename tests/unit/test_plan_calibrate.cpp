// --calibrate-seconds bounds the whole calibration (issue 12): the interleaved rounds of
// launch/calibrate/probes.h adapt to the time left after the warm-up.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "launch/calibrate/probes.h"

namespace braid::plan::probes {

namespace {

// `n` probes that each take `ms` milliseconds per call.
Probes sleepers(int n, int ms) {
  Probes p;
  for (int i = 0; i < n; ++i)
    p.add([ms] { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }, 1.0);
  return p;
}

}  // namespace

TEST(PlanCalibrate, TheBudgetBoundsTheWholeRun) {
  Probes p = sleepers(5, 10);  // one round of single calls: 50 ms
  const auto start = Clock::now();
  const Probes::RunReport rep = p.run(6, 0.6, start);
  const double took = seconds_since(start);
  EXPECT_LE(took, 0.6 + 0.05);  // sleeps overshoot by a little
  EXPECT_EQ(rep.rounds, 6);     // 6 x 50 ms fits in the 550 ms left after the warm-up
  EXPECT_GT(took,
            0.3);  // and the rounds are run (a call is not started when it would overrun its share)
  EXPECT_NEAR(p.rate(0), 100.0, 15.0);  // 1 unit per ~10 ms call
}

TEST(PlanCalibrate, RoundsAreDroppedWhenOneCallEachDoesNotFit) {
  // Old behaviour: every probe ran at least once in each of the 6 rounds after its warm-up, so
  // a 0.2 s budget took 7 x 50 ms here (and minutes with the real probes).
  Probes p = sleepers(5, 10);
  const auto start = Clock::now();
  const Probes::RunReport rep = p.run(6, 0.2, start);
  const double took = seconds_since(start);
  EXPECT_GE(rep.rounds,
            2);  // 150 ms left after a 50 ms warm-up: 3 rounds, 2 when the sleeps overshoot
  EXPECT_LE(rep.rounds, 3);
  EXPECT_LE(took, 0.2 + 0.05);
}

TEST(PlanCalibrate, BelowTheFloorTheWarmUpIsTheMeasurement) {
  Probes p = sleepers(4, 20);  // warm-up 80 ms, one timed round another 80 ms
  const auto start = Clock::now();
  const Probes::RunReport rep = p.run(6, 0.05, start);
  const double took = seconds_since(start);
  EXPECT_EQ(rep.rounds, 0);
  EXPECT_GT(rep.floor_s, 0.15);
  EXPECT_LT(rep.floor_s, 0.2);
  EXPECT_LT(took, 0.12);               // only the warm-up calls ran
  EXPECT_NEAR(p.rate(3), 50.0, 10.0);  // one unit per ~20 ms call
}

}  // namespace braid::plan::probes
