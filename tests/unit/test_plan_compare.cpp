// braid plan --compare: reading a run's metrics, averaging profiles, the side tables and the
// block element-wise rates of the calibrated CPU model.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "data_test_util.h"
#include "launch/plan/compare.h"
#include "launch/plan/cpu_model.h"
#include "launch/plan/gpu_table.h"
#include "launch/plan/model_math.h"
#include "launch/plan/time_model.h"
#include "plan_test_util.h"

namespace braid::plan {

namespace fs = std::filesystem;

namespace {

// A run directory whose metrics.jsonl the test writes.
struct RunDir {
  braid::testing::TempDir dir{"plan_compare"};
  fs::path path = dir.path();
  void metrics(const std::string& text) const {
    braid::testing::write_text(dir.file("metrics.jsonl"), text);
  }
};

DeviceProfile profile(double scale) { return testing::cpu_profile(scale); }
CpuProfile rates(double scale) { return testing::cpu_profile(scale).cpu; }
ModelConfig tiny() { return testing::tiny_gpt2(); }

}  // namespace

TEST(PlanCompare, ReadsTheLastSegmentAfterItsWarmUpWindow) {
  RunDir dir;
  dir.metrics(
      R"({"event":"start","step":0})"
      "\n"
      R"({"step":10,"step_s":9.0,"kernel_s":{"gemm":9.0}})"
      "\n"
      R"({"event":"resume","step":10})"
      "\n"
      R"({"step":12,"step_s":5.0,"kernel_s":{"gemm":4.0,"other":1.0}})"  // warm-up: left out
      "\n"
      R"({"step":14,"step_s":1.0,"kernel_s":{"gemm":0.5,"other":0.5}})"
      "\n"
      R"({"step":14,"val_loss":3.0})"
      "\n"
      R"({"step":20,"step_s":2.0,"kernel_s":{"gemm":1.5,"other":0.5}})"
      "\n"
      R"({"event":"end","step":20})"
      "\n");
  const MeasuredRun r = read_run_metrics(dir.path.string());
  EXPECT_EQ(r.windows, 2);
  EXPECT_EQ(r.skipped_windows, 1);
  EXPECT_EQ(r.steps, 8);  // 2 + 6 steps
  EXPECT_NEAR(r.step_s, (2 * 1.0 + 6 * 2.0) / 8, 1e-12);
  EXPECT_NEAR(r.kernel_s.at("gemm"), (2 * 0.5 + 6 * 1.5) / 8, 1e-12);
  EXPECT_NEAR(r.kernel_s.at("other"), 0.5, 1e-12);
}

TEST(PlanCompare, OneWindowIsUsedWhenItIsAllThereIs) {
  RunDir dir;
  dir.metrics(R"({"event":"start","step":0})"
              "\n"
              R"({"step":4,"step_s":0.25})"
              "\n");
  const MeasuredRun r = read_run_metrics(dir.path.string());
  EXPECT_EQ(r.windows, 1);
  EXPECT_EQ(r.skipped_windows, 0);
  EXPECT_NEAR(r.step_s, 0.25, 1e-12);
  EXPECT_TRUE(r.kernel_s.empty());
}

TEST(PlanCompare, MissingOrEmptyMetricsAreUserErrors) {
  RunDir dir;
  EXPECT_THROW(read_run_metrics((dir.path / "nothing").string()), UserError);
  dir.metrics(R"({"event":"start","step":0})"
              "\n");
  try {
    read_run_metrics(dir.path.string());
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("no timed log windows"), std::string::npos) << e.what();
  }
  dir.metrics("{not json\n");
  EXPECT_THROW(read_run_metrics(dir.path.string()), UserError);
}

TEST(PlanCompare, AveragedProfilesPredictTheMeanTime) {
  // Rates 1x and 3x: times t and t/3, mean 2t/3, i.e. the harmonic mean rate 1.5x.
  const DeviceProfile a = profile(1.0), b = profile(3.0);
  const DeviceProfile m = average_profiles({a, b});
  EXPECT_NEAR(m.cpu.gemm_by_width[1].rate, 0.15, 1e-12);
  EXPECT_NEAR(m.cpu.elementwise_gbs, 30, 1e-9);
  EXPECT_NEAR(m.gpu.tflops_fp32, 0.15, 1e-12);
  EXPECT_NEAR(m.cpu.kernel_call_us, (10 + 10.0 / 3) / 2, 1e-12);  // a time: arithmetic mean
  const TrainOptions t = testing::tiny_train();
  const double ta = cpu_microbatch_time(tiny(), t, a.cpu, 2, true, 1).compute();
  const double tb = cpu_microbatch_time(tiny(), t, b.cpu, 2, true, 1).compute();
  const double tm = cpu_microbatch_time(tiny(), t, m.cpu, 2, true, 1).compute();
  EXPECT_NEAR(tm, (ta + tb) / 2, 1e-12 * ta);
  DeviceProfile c = profile(2.0);
  c.cpu.gemm_by_width.pop_back();
  EXPECT_THROW(average_profiles({a, c}), UserError);
}

TEST(PlanCompare, SideTablesScaleRatesAgainstTheirReference) {
  const std::vector<RatePoint> by_seq = {{128, 0.5}, {256, 1.0}, {512, 1.0}};
  EXPECT_DOUBLE_EQ(side_factor(by_seq, 128, 256), 0.5);
  EXPECT_DOUBLE_EQ(side_factor(by_seq, 1024, 256), 1.0);
  EXPECT_DOUBLE_EQ(side_factor({}, 128, 256), 1.0);  // profiles without the table
  const ModelConfig m = tiny();
  const TrainOptions t = testing::tiny_train();
  CpuProfile g = rates(1.0);
  const CpuStepTime base = cpu_microbatch_time(m, t, g, 2, true, 1);
  g.attention_by_seq = {{32, 0.01}, {256, 0.02}};
  g.attention_ref_seq = 256;
  g.lm_head_by_vocab = {{128, 0.2}, {4096, 0.1}};
  g.lm_head_ref_vocab = 4096;
  g.gemm_by_tokens = {{64, 0.025}, {2048, 0.05}};
  g.gemm_ref_tokens = 2048;
  g.attention_by_width = {{64, 0.08}, {512, 0.02}};  // width 64: 4x the rate at 512
  g.attention_ref_width = 512;
  const CpuStepTime k = cpu_microbatch_time(m, t, g, 2, true, 1);
  // T 32: half the rate; width 64: four times: 2x the rate, half the time.
  EXPECT_NEAR(k.attention, base.attention / 2, 1e-12 * base.attention);
  EXPECT_NEAR(k.lm_head, base.lm_head / 2, 1e-12 * base.lm_head);  // V 128: twice
  EXPECT_NEAR(k.gemm, 2 * base.gemm, 1e-12 * base.gemm);           // 64 tokens: half
}

TEST(PlanCompare, BlockElementwiseRatesReplaceTheNormBandwidth) {
  const ModelConfig m = tiny();
  const TrainOptions t = testing::tiny_train();
  CpuProfile g = rates(1.0);
  const double tokens = 64;
  const CpuStepTime plain = cpu_microbatch_time(m, t, g, 2, true, 1);
  // 2 blocks x 35 calls + 5 edge calls at 10 us when the block rates are not measured.
  EXPECT_NEAR(plain.calls, (2 * 35 + 5) * 10e-6, 1e-15);
  g.block_elementwise_by_width = {{32, 5}, {128, 10}};  // width 64: 7.5 GB/s (log-linear)
  const CpuStepTime k = cpu_microbatch_time(m, t, g, 2, true, 1);
  EXPECT_NEAR(k.elementwise,
              2 * block_elementwise_bytes_per_token(m) * tokens / 7.5e9 +
                  edge_elementwise_bytes_per_token(m) * tokens / 20e9,
              1e-15);
  // A real block's calls are inside its measured rates: only the 5 edge calls remain.
  EXPECT_NEAR(k.calls, 5 * 10e-6, 1e-15);
  // The Llama table is not used for GPT-2.
  g.block_elementwise_llama_by_width = {{64, 1000}};
  EXPECT_NEAR(cpu_microbatch_time(m, t, g, 2, true, 1).elementwise, k.elementwise, 1e-18);
}

TEST(PlanCompare, OptimizerTableTimesTheParameterPasses) {
  const ModelConfig m = tiny();
  const TrainOptions t = testing::tiny_train(2);
  Cluster c = testing::cpu_cluster(profile(1.0));
  c.cpu.optimizer_by_params = {{1e3, 8}, {1e9, 8}};
  const PlanResult r = predict(m, t, Layout{1, 1, 1, 1, "1f1b"}, c);
  ASSERT_TRUE(r.kernel_model);
  // 8 fp32 arrays per parameter at the measured 8 GB/s; no separate call term.
  EXPECT_NEAR(r.time.optimizer, 8.0 * 4.0 * static_cast<double>(m.num_params()) / 8e9, 1e-12);
  EXPECT_NEAR(r.cpu_kernels.optimizer, r.time.optimizer, 1e-15);
}

TEST(PlanCompare, DeviceProfileKeepsTheNewTables) {
  RunDir dir;
  const std::string path = (dir.path / "p.json").string();
  DeviceProfile d = profile(1.0);
  CpuProfile& g = d.cpu;
  g.attention_by_seq = {{128, 0.03}, {256, 0.04}};
  g.attention_ref_seq = 256;
  g.attention_by_width = {{128, 0.05}};
  g.attention_ref_width = 512;
  g.lm_head_by_vocab = {{512, 0.1}};
  g.lm_head_ref_vocab = 4096;
  g.gemm_by_tokens = {{1024, 0.09}};
  g.gemm_ref_tokens = 2048;
  g.block_elementwise_by_width = {{128, 17.5}};
  g.block_elementwise_llama_by_width = {{256, 21}};
  g.optimizer_by_params = {{1e6, 12.5}, {1.6e7, 14}};
  save_device_profile(d, path);
  const CpuProfile r = load_device_profile(path).cpu;
  ASSERT_EQ(r.attention_by_seq.size(), 2u);
  EXPECT_DOUBLE_EQ(r.attention_by_seq[0].rate, 0.03);
  EXPECT_DOUBLE_EQ(r.attention_ref_seq, 256);
  ASSERT_EQ(r.attention_by_width.size(), 1u);
  EXPECT_DOUBLE_EQ(r.attention_by_width[0].rate, 0.05);
  EXPECT_DOUBLE_EQ(r.attention_ref_width, 512);
  EXPECT_DOUBLE_EQ(r.lm_head_by_vocab[0].key, 512);
  EXPECT_DOUBLE_EQ(r.lm_head_ref_vocab, 4096);
  EXPECT_DOUBLE_EQ(r.gemm_by_tokens[0].rate, 0.09);
  EXPECT_DOUBLE_EQ(r.gemm_ref_tokens, 2048);
  EXPECT_DOUBLE_EQ(r.block_elementwise_by_width[0].rate, 17.5);
  EXPECT_DOUBLE_EQ(r.block_elementwise_llama_by_width[0].key, 256);
  ASSERT_EQ(r.optimizer_by_params.size(), 2u);
  EXPECT_DOUBLE_EQ(r.optimizer_by_params[1].rate, 14);
  // A side table without its reference shape is refused.
  std::ofstream(dir.path / "bad.json")
      << R"({"name":"x","memory_gib":1,"tflops_fp32":1,"mem_bw_gbs":1,"intra_bw_gbs":1,)"
         R"("inter_bw_gbs":1,"attention_seq_tflops":[{"seq":128,"tflops":1}]})";
  EXPECT_THROW(load_device_profile((dir.path / "bad.json").string()), UserError);
}

}  // namespace braid::plan
