// braid plan on multi-rank CPU runs: a config's layout, a run's layout (run.json), the measured
// CPU communication fit, and braid's bucket-bound gradients.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "core/error.h"
#include "launch/config/config.h"
#include "launch/plan/compare.h"
#include "launch/plan/config_input.h"
#include "launch/plan/cpu_model.h"
#include "launch/plan/memory_model.h"
#include "launch/plan/time_model.h"
#include "plan_test_util.h"

namespace braid::plan {

namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("braid_plan_ranks_" + std::to_string(getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name) << text;
    return (path / name).string();
  }
};

RunConfig parallel_config() {
  RunConfig cfg;
  cfg.model = testing::tiny_gpt2();
  cfg.data.micro_batch = 2;
  cfg.data.seq_len = 32;
  cfg.data.grad_accum = 4;
  return cfg;
}

std::string expect_user_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a UserError";
  return "";
}

}  // namespace

TEST(PlanRanks, RunConfigGivesItsLayout) {
  RunConfig cfg = parallel_config();
  cfg.parallel.dp = 2;
  cfg.parallel.tp = 2;
  cfg.parallel.pp = 2;
  cfg.parallel.schedule = "interleaved-1f1b";
  cfg.parallel.virtual_stages = 2;
  const ConfigPlanInput in = plan_input_from_run_config(cfg);
  EXPECT_EQ(in.layout.dp, 2);
  EXPECT_EQ(in.layout.tp, 2);
  EXPECT_EQ(in.layout.pp, 2);
  EXPECT_EQ(in.layout.schedule, "interleaved");
  EXPECT_EQ(in.layout.vp, 2);
  EXPECT_FALSE(in.dp_auto);
  EXPECT_EQ(in.train.global_batch, 2 * 4 * 2);  // micro-batch x grad_accum x dp
  EXPECT_TRUE(in.train.grads_in_buckets);
  EXPECT_TRUE(in.schedule_error.empty());
  cfg.parallel.schedule = "zb-h1";
  EXPECT_NE(plan_input_from_run_config(cfg).schedule_error.find("zb-h1"), std::string::npos);
  cfg.parallel.dp = std::nullopt;
  EXPECT_EQ(plan_input_from_run_config(cfg).layout.dp, 1);
  EXPECT_TRUE(plan_input_from_run_config(cfg).dp_auto);
}

TEST(PlanRanks, RunLayoutComesFromRunJson) {
  TempDir dir;
  dir.write("run.json",
            R"({"attempts": [{"threads": 4, "parallel_layout": {"ranks": 1, "dp": 1, "tp": 1,
              "pp": 1, "zero": 0}}, {"threads": 1, "parallel_layout": {"ranks": 4, "dp": 2,
              "tp": 2, "pp": 1, "zero": 1}}]})");
  const RunLayout r = read_run_layout(dir.path.string());  // the last attempt
  EXPECT_EQ(r.ranks, 4);
  EXPECT_EQ(r.dp, 2);
  EXPECT_EQ(r.tp, 2);
  EXPECT_EQ(r.zero, 1);
  EXPECT_EQ(r.threads, 1);
  ConfigPlanInput in = plan_input_from_run_config(parallel_config());
  apply_run_layout(in, r);
  EXPECT_EQ(in.layout.dp, 2);
  EXPECT_EQ(in.layout.tp, 2);
  EXPECT_EQ(in.train.global_batch, 16);
  EXPECT_EQ(in.train.zero, 1);
  dir.write("run.json", R"({"attempts": [{"parallel_layout": {"ranks": 3, "dp": 2}}]})");
  EXPECT_NE(expect_user_error([&] { read_run_layout(dir.path.string()); }).find("ranks 3"),
            std::string::npos);
  EXPECT_NE(expect_user_error([&] {
              read_run_layout((dir.path / "none").string());
            }).find("none/run.json"),
            std::string::npos);
}

TEST(PlanRanks, MeasuredCommunicationTimesTheCollectives) {
  const ModelConfig m = testing::tiny_gpt2();
  TrainOptions t = testing::tiny_train(4);  // 2 micro-batches of 2 x 32 tokens
  t.pp_overlap = false;                     // as a braid config: every pipeline message waits
  DeviceProfile d = testing::cpu_profile();
  Cluster c = testing::cpu_cluster(d);
  c.gpus_per_node = 2;
  const Layout tp2{1, 2, 1, 1, "1f1b"};
  const double bytes = 64.0 * 4 * m.n_embd;  // one micro-batch's activations, fp32
  // Not measured: half the copy rate at the GPU collective efficiency, 10 us per hop.
  const PlanResult plain = predict(m, t, tp2, c);
  EXPECT_NEAR(plain.time.tp_comm, 2 * 2 * 4 * (bytes / (5e9 * 0.8) + 2 * 10e-6), 1e-12);
  // Measured: 2 ranks move the buffer once at comm_bus_gbs, plus the fixed cost.
  c.cpu.comm_bus_gbs = 1;
  c.cpu.comm_latency_us = 30;
  const PlanResult fit = predict(m, t, tp2, c);
  EXPECT_NEAR(fit.time.tp_comm, 2 * 2 * 4 * (bytes / 1e9 + 30e-6), 1e-12);
  // Pipeline messages use the same link: (2 m v + 2 (p - 1)) transfers.
  const PlanResult pp = predict(m, t, Layout{1, 1, 2, 1, "1f1b"}, c);
  EXPECT_NEAR(pp.time.p2p, (2 * 2 + 2) * (bytes / 1e9 + 15e-6), 1e-12);
  // With overlap only the fill and drain, 2 (p - 1), wait.
  t.pp_overlap = true;
  const PlanResult overlapped = predict(m, t, Layout{1, 1, 2, 1, "1f1b"}, c);
  EXPECT_NEAR(overlapped.time.p2p, 2 * (bytes / 1e9 + 15e-6), 1e-12);
}

TEST(PlanRanks, TensorParallelSplitsTheActivationKernels) {
  const ModelConfig m = testing::tiny_gpt2();
  const CpuProfile g = testing::cpu_profile().cpu;
  const CpuStepTime one = cpu_microbatch_time(m, testing::tiny_train(), g, 2, true, 1);
  const CpuStepTime two = cpu_microbatch_time(m, testing::tiny_train(), g, 2, true, 2);
  EXPECT_NEAR(two.activation, one.activation / 2, 1e-15);
  EXPECT_NEAR(two.gemm, one.gemm / 2, 1e-15);
}

TEST(PlanRanks, BucketBoundGradientsNeedNoBuffers) {
  const ModelConfig m = testing::tiny_gpt2();
  TrainOptions t = testing::tiny_train(4);
  const GpuSpec g = testing::cpu_profile().gpu;
  const Layout dp2{2, 1, 1, 1, "1f1b"};
  EXPECT_DOUBLE_EQ(stage_memory(m, t, dp2, g, 0).comm, 2 * 25.0 * 1024 * 1024);
  t.grads_in_buckets = true;
  EXPECT_DOUBLE_EQ(stage_memory(m, t, dp2, g, 0).comm, 0.0);
}

TEST(PlanRanks, ProfilesOfOtherThreadCountsDoNotAverage) {
  DeviceProfile a = testing::cpu_profile(), b = testing::cpu_profile(2.0);
  a.cpu.threads = 1;
  b.cpu.threads = 2;
  EXPECT_NE(expect_user_error([&] {
              average_profiles({a, b});
            }).find("1 and 2 threads"),
            std::string::npos);
  b.cpu.threads = 1;
  a.cpu.comm_bus_gbs = 1;
  b.cpu.comm_bus_gbs = 3;
  a.cpu.comm_latency_us = 10;
  b.cpu.comm_latency_us = 30;
  const DeviceProfile m = average_profiles({a, b});
  EXPECT_DOUBLE_EQ(m.cpu.comm_bus_gbs, 1.5);  // harmonic: the mean of the two times per byte
  EXPECT_DOUBLE_EQ(m.cpu.comm_latency_us, 20);
}

}  // namespace braid::plan
