// --calibrate-seconds bounds the whole calibration (issue 12): the interleaved rounds of
// launch/calibrate/probes.h adapt to the time left after the warm-up.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "launch/calibrate/probes.h"

namespace braid::plan::probes {

namespace {

// A simulated clock: a probe's call advances it by exactly its cost, so the rounds, the time
// taken and the rates are exact (real sleeps overshoot by milliseconds on a loaded machine).
struct SimClock {
  Clock::time_point t = Clock::time_point{} + std::chrono::hours(1);
  void advance_ms(int ms) { t += std::chrono::milliseconds(ms); }
};

// `n` probes that each take `ms` milliseconds of simulated time per call.
Probes sleepers(int n, int ms, SimClock& clock) {
  Probes p;
  p.set_clock([&clock] { return clock.t; });
  for (int i = 0; i < n; ++i) p.add([ms, &clock] { clock.advance_ms(ms); }, 1.0);
  return p;
}

double seconds_since(const SimClock& c, Clock::time_point t0) {
  return std::chrono::duration<double>(c.t - t0).count();
}

}  // namespace

TEST(PlanCalibrate, TheBudgetBoundsTheWholeRun) {
  SimClock clock;
  Probes p = sleepers(5, 10, clock);  // one round of single calls: 50 ms
  const auto start = clock.t;
  const Probes::RunReport rep = p.run(6, 0.6, start);
  const double took = seconds_since(clock, start);
  EXPECT_LE(took, 0.6 + 1e-9);
  EXPECT_EQ(rep.rounds, 6);  // 6 x 50 ms fits in the 550 ms left after the warm-up
  // Each probe's share is 550/30 ms: one call of 10 ms fits, a second would overrun it, so the
  // run ends after the warm-up plus 6 rounds of 50 ms.
  EXPECT_NEAR(took, 0.05 + 6 * 0.05, 1e-9);
  EXPECT_NEAR(p.rate(0), 100.0, 1e-6);  // 1 unit per 10 ms call
  EXPECT_NEAR(p.seconds_per_call(4), 0.01, 1e-12);
}

TEST(PlanCalibrate, RoundsAreDroppedWhenOneCallEachDoesNotFit) {
  // Old behaviour: every probe ran at least once in each of the 6 rounds after its warm-up, so
  // a 0.2 s budget took 7 x 50 ms here (and minutes with the real probes).
  SimClock clock;
  Probes p = sleepers(5, 10, clock);
  const auto start = clock.t;
  const Probes::RunReport rep = p.run(6, 0.2, start);
  const double took = seconds_since(clock, start);
  EXPECT_EQ(rep.rounds, 3);  // 150 ms left after a 50 ms warm-up: 3 rounds of 50 ms
  EXPECT_NEAR(took, 0.2, 1e-9);
}

TEST(PlanCalibrate, BelowTheFloorTheWarmUpIsTheMeasurement) {
  SimClock clock;
  Probes p = sleepers(4, 20, clock);  // warm-up 80 ms, one timed round another 80 ms
  const auto start = clock.t;
  const Probes::RunReport rep = p.run(6, 0.05, start);
  const double took = seconds_since(clock, start);
  EXPECT_EQ(rep.rounds, 0);
  EXPECT_NEAR(rep.floor_s, 0.16, 1e-9);
  EXPECT_NEAR(took, 0.08, 1e-9);       // only the warm-up calls ran
  EXPECT_NEAR(p.rate(3), 50.0, 1e-6);  // one unit per 20 ms call
}

TEST(PlanCalibrate, TheSteadyClockIsTheDefault) {
  // Without a simulated clock run() times real calls.
  Probes p;
  p.add([] { std::this_thread::sleep_for(std::chrono::milliseconds(2)); }, 1.0);
  const auto start = Clock::now();
  const Probes::RunReport rep = p.run(2, 0.5, start);
  EXPECT_GE(rep.rounds, 1);
  EXPECT_GE(p.seconds_per_call(0), 0.002);  // a sleep never returns early
  EXPECT_LE(seconds_since(start), 0.5 + 0.5);
}

}  // namespace braid::plan::probes
