// The pipeline executor's busy time and trace on a device: with a device timeline the F, B and W
// actions are measured between marks on the stream, not by the host (which only queues their
// kernels on a GPU). A scripted timeline stands in for the GPU's events, so the arithmetic that
// turns marks into busy time and trace bars runs on every machine.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "core/profile.h"
#include "parallel/pipeline_executor.h"
#include "tests/unit/model_test_util.h"

namespace braid::test {
namespace {

// Mark n (counted over the timeline's life) lands at n^2 ms: every gap differs, so a mark
// matched to the wrong action shows in the totals.
class SquareClock final : public DeviceTimeline {
 public:
  static double at(size_t n) { return 1e-3 * static_cast<double>(n * n); }
  void mark() override { marks_.push_back(count_++); }
  size_t pending() const override { return marks_.size(); }
  std::vector<double> drain() override {
    std::vector<double> gaps;
    for (size_t i = 0; i + 1 < marks_.size(); ++i)
      gaps.push_back(at(marks_[i + 1]) - at(marks_[i]));
    if (!marks_.empty()) marks_.erase(marks_.begin(), marks_.end() - 1);
    return gaps;
  }
  size_t count() const { return count_; }

 private:
  size_t count_ = 0;
  std::vector<size_t> marks_;
};

struct OneStage {
  ModelConfig cfg = model_test::tiny("llama", 2);
  ExecContext ctx;
  std::unique_ptr<Transformer> model;
  explicit OneStage() {
    model = std::make_unique<Transformer>(ctx, cfg);
    model->init_weights();
  }
  PipelineStepInput input(int m, int step) const {
    PipelineStepInput in;
    for (int i = 0; i < m; ++i) {
      in.tokens.push_back(model_test::tokens_of(2, 6, cfg.vocab_size, 100 * step + 2 * i + 1));
      in.targets.push_back(model_test::tokens_of(2, 6, cfg.vocab_size, 100 * step + 2 * i + 2));
    }
    in.batch = 2;
    in.seq = 6;
    in.grad_scale = 1.0f / static_cast<float>(m * 12);
    return in;
  }
};

// Each compute action has two marks of its own after the step's first: action k of a step
// whose first mark is mark s spans marks s + 2k + 1 .. s + 2k + 2.
double expected_busy(size_t first_mark, int actions) {
  double busy = 0;
  for (int k = 0; k < actions; ++k)
    busy += SquareClock::at(first_mark + 2 * k + 2) - SquareClock::at(first_mark + 2 * k + 1);
  return busy;
}

TEST(PipelineDeviceTime, BusyTimeAndTraceComeFromTheDeviceMarks) {
  for (ScheduleKind kind : {ScheduleKind::OneFOneB, ScheduleKind::ZbH1}) {
    SCOPED_TRACE(schedule_kind_name(kind));
    OneStage s;
    const int m = 3;
    const PipelineSchedule ps = build_pipeline_schedule({kind, 1, m, 1, s.cfg.n_layer});
    int compute = 0;
    for (const Action& a : ps.stages[0]) compute += is_compute(a.type) ? 1 : 0;
    ASSERT_EQ(compute, kind == ScheduleKind::ZbH1 ? 3 * m : 2 * m);

    auto clock = std::make_shared<SquareClock>();
    PipelineExecutorOptions opt;
    opt.trace = true;
    opt.device_timeline = clock;
    PipelineExecutor ex(s.ctx, ps, 0, {s.model.get()}, nullptr, nullptr, opt);

    // Step 1 starts on a fresh timeline (its first mark is mark 0); step 2 after the mark the
    // first step's drain keeps (mark 2 * compute, the first step's last), which starts the
    // drained intervals: its own first mark is mark 1 + 2 * compute.
    size_t first = 0;
    for (int step = 0; step < 2; ++step) {
      ex.clear_trace();
      const PipelineStepResult r = ex.step(s.input(m, step));
      EXPECT_NEAR(r.busy_s, expected_busy(first, compute), 1e-12) << "step " << step;
      EXPECT_EQ(clock->count(), first + 1 + 2 * static_cast<size_t>(compute));
      EXPECT_EQ(clock->pending(), 1u) << "every mark but the last drained at the step's end";
      // The trace's compute bars: device durations, placed from the step's first mark.
      int k = 0;
      double step_start_us = -1;
      for (const TraceEvent& e : ex.trace()) {
        if (e.tid != 0) continue;  // receives, sends and waits stay host times
        const double begin = SquareClock::at(first + 2 * k + 1) - SquareClock::at(first);
        const double end = SquareClock::at(first + 2 * k + 2) - SquareClock::at(first);
        EXPECT_NEAR(e.dur_us, (end - begin) * 1e6, 1e-6) << e.name;
        if (k == 0) step_start_us = e.ts_us - begin * 1e6;
        EXPECT_NEAR(e.ts_us - step_start_us, begin * 1e6, 1e-6) << e.name;
        ++k;
      }
      EXPECT_EQ(k, compute);
      if (step == 0) {
        EXPECT_NEAR(step_start_us, 0.0, 1e-6);  // the trace's origin
      }
      first = clock->count();
    }
  }
}

TEST(PipelineDeviceTime, WithoutATimelineTheHostTimesTheActions) {
  OneStage s;
  const PipelineSchedule ps = build_pipeline_schedule({ScheduleKind::OneFOneB, 1, 2, 1, 2});
  PipelineExecutorOptions opt;
  opt.trace = true;
  PipelineExecutor ex(s.ctx, ps, 0, {s.model.get()}, nullptr, nullptr, opt);
  const PipelineStepResult r = ex.step(s.input(2, 0));
  double bars = 0;
  for (const TraceEvent& e : ex.trace())
    if (e.tid == 0) bars += e.dur_us * 1e-6;
  EXPECT_GT(r.busy_s, 0.0);
  EXPECT_NEAR(r.busy_s, bars, 1e-9);
  EXPECT_LE(r.busy_s, r.wall_s);
}

}  // namespace
}  // namespace braid::test
