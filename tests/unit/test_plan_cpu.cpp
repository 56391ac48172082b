// braid plan on our own CPU: config input, calibrated kernel rates, the kernel-wise step model.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "launch/plan/config_input.h"
#include "launch/plan/cpu_model.h"
#include "launch/plan/gpu_table.h"
#include "launch/plan/memory_model.h"
#include "launch/plan/model_math.h"
#include "launch/plan/time_model.h"
#include "plan_test_util.h"

namespace braid::plan {

namespace fs = std::filesystem;

namespace {

using testing::cpu_profile;
ModelConfig tiny() { return testing::tiny_gpt2(); }

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("braid_plan_cpu_" + std::to_string(getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name) << text;
    return (path / name).string();
  }
};

}  // namespace

TEST(PlanCpu, RateInterpolatesInLogWidthAndClamps) {
  const std::vector<RatePoint> t = {{512, 0.2}, {128, 0.1}};  // unsorted on purpose
  EXPECT_DOUBLE_EQ(rate_at(t, 256), 0.15);                    // log2 midpoint of 128 and 512
  EXPECT_DOUBLE_EQ(rate_at(t, 128), 0.1);
  EXPECT_DOUBLE_EQ(rate_at(t, 64), 0.1);    // below the table: the first point
  EXPECT_DOUBLE_EQ(rate_at(t, 4096), 0.2);  // above: the last
  EXPECT_THROW(rate_at({}, 64), Error);
}

TEST(PlanCpu, KernelWorkCountsByHand) {
  const ModelConfig m = tiny();
  // forward 2hs + backward 5hs over the causal half: 7 * 64 * 32.
  EXPECT_DOUBLE_EQ(attention_kernel_flops_per_token(m, 32), 7.0 * 64 * 32);
  // gpt2 block without GELU: forward 15C + F, backward 17C + F elements of 4 bytes; C 64, F 256.
  EXPECT_DOUBLE_EQ(block_elementwise_bytes_per_token(m), 4.0 * (32 * 64 + 2 * 256));
  // llama, C 64, kv 32 (2 of 4 heads): forward 10C + 2(C+kv), backward 18C + 2(C+kv).
  ModelConfig l = m;
  l.family = "llama";
  l.n_kv_head = 2;
  EXPECT_DOUBLE_EQ(block_elementwise_bytes_per_token(l), 4.0 * (28 * 64 + 4 * 96));
  // GELU over F = 256 at 0.5e9 elements/s; llama SwiGLU over its F (192) at 0.25e9.
  EXPECT_DOUBLE_EQ(block_activation_seconds_per_token(m, cpu_profile().cpu), 256 / 0.5e9);
  EXPECT_DOUBLE_EQ(block_activation_seconds_per_token(l, cpu_profile().cpu), l.ffn() / 0.25e9);
  // AdamW: norm 1 + update 7 (the clip inside it) = 8 arrays; SGD 6.
  EXPECT_DOUBLE_EQ(optimizer_step_bytes(1000, "adamw"), 32000.0);
  EXPECT_DOUBLE_EQ(optimizer_step_bytes(1000, "sgd"), 24000.0);
  // adamw8bit: the update moves w (r+w), g and the two 1-byte moments (r+w): 4 arrays, not 7.
  EXPECT_DOUBLE_EQ(optimizer_step_bytes(1000, "adamw8bit"), 20000.0);
}

// Optimizer state per trainable parameter: two f32 moments; two bytes plus two f32 absmax per
// 2048 elements for adamw8bit. An NF4 base with double quantisation: QLoRA's 4.127 bits.
TEST(PlanMemory, OptimizerStateAndQuantisedBaseBytesPerParameter) {
  EXPECT_DOUBLE_EQ(optimizer_state_bytes("adamw"), 8.0);
  EXPECT_DOUBLE_EQ(optimizer_state_bytes("adamw8bit"), 2.00390625);
  EXPECT_DOUBLE_EQ(lora_base_bytes("nf4") * 8.0, 4.127);
  EXPECT_DOUBLE_EQ(lora_base_bytes("int8"), 1.0);
}

TEST(PlanCpu, MicrobatchTimeFromRates) {
  const ModelConfig m = tiny();
  const TrainOptions t = testing::tiny_train();
  const CpuProfile g = cpu_profile().cpu;
  const CpuStepTime k = cpu_microbatch_time(m, t, g, 2, true, 1);
  const double tokens = 64;
  // width 64 lies halfway (in log) between 32 and 128: 0.075 TFLOP/s.
  EXPECT_NEAR(k.gemm, 2 * 6.0 * block_matmul_params(m) * tokens / 0.075e12, 1e-15);
  EXPECT_NEAR(k.attention, 2 * 7.0 * 64 * 32 * tokens / 0.04e12, 1e-15);
  EXPECT_NEAR(k.lm_head, 6.0 * 128 * 64 * tokens / 0.08e12, 1e-15);
  const double bytes = 2 * block_elementwise_bytes_per_token(m) * tokens +
                       edge_elementwise_bytes_per_token(m) * tokens;
  EXPECT_NEAR(k.elementwise, bytes / 20e9, 1e-15);
  EXPECT_NEAR(k.activation, 2 * tokens * 256 / 0.5e9, 1e-15);
  // 2 blocks x 35 calls + 5 for the edges, 10 us each.
  EXPECT_NEAR(k.calls, (2 * 35 + 5) * 10e-6, 1e-15);
}

TEST(PlanCpu, PredictUsesKernelRatesForCalibratedProfiles) {
  const ModelConfig m = tiny();
  const TrainOptions t = testing::tiny_train(6);
  Cluster c = testing::cpu_cluster(cpu_profile());
  const PlanResult r = predict(m, t, Layout{1, 1, 1, 1, "1f1b"}, c);
  ASSERT_TRUE(r.kernel_model);
  const CpuStepTime mb = cpu_microbatch_time(m, t, c.cpu, 2, true, 1);
  EXPECT_NEAR(r.time.compute, 3 * mb.compute(), 1e-12);  // 3 micro-batches
  // 8 fp32 arrays per parameter at 10 GB/s, + 4 calls per tensor (2 x 12 + 4 tensors) at 10 us.
  EXPECT_EQ(parameter_tensors(m), 28);
  EXPECT_NEAR(r.time.optimizer,
              optimizer_step_bytes(m.num_params(), "adamw") / 10e9 + 4 * 28 * 10e-6, 1e-12);
  EXPECT_NEAR(r.time.step(), r.cpu_kernels.total(), 1e-12);
  // Without the rates the generic roofline is used.
  c.cpu.elementwise_gbs = 0;
  EXPECT_FALSE(predict(m, t, Layout{1, 1, 1, 1, "1f1b"}, c).kernel_model);
}

TEST(PlanCpu, DeviceProfileKeepsKernelRates) {
  TempDir dir;
  const std::string path = (dir.path / "profile.json").string();
  DeviceProfile saved = cpu_profile();
  saved.cpu.gemm_llama_by_width = {{256, 0.09}};
  saved.cpu.attention_gqa_by_head_dim = {{32, 0.05}};
  save_device_profile(saved, path);
  const CpuProfile g = load_device_profile(path).cpu;
  ASSERT_EQ(g.gemm_llama_by_width.size(), 1u);
  EXPECT_DOUBLE_EQ(g.gemm_llama_by_width[0].rate, 0.09);
  EXPECT_DOUBLE_EQ(g.attention_gqa_by_head_dim[0].key, 32);
  ASSERT_EQ(g.gemm_by_width.size(), 2u);
  EXPECT_DOUBLE_EQ(g.gemm_by_width[1].key, 128);
  EXPECT_DOUBLE_EQ(g.gemm_by_width[1].rate, 0.1);
  EXPECT_DOUBLE_EQ(g.attention_by_head_dim[0].rate, 0.04);
  EXPECT_DOUBLE_EQ(g.lm_head_by_width[0].key, 64);
  EXPECT_DOUBLE_EQ(g.elementwise_gbs, 20);
  EXPECT_DOUBLE_EQ(g.gelu_gelems, 0.5);
  EXPECT_DOUBLE_EQ(g.swiglu_gelems, 0.25);
  EXPECT_DOUBLE_EQ(g.kernel_call_us, 10);
  EXPECT_TRUE(has_kernel_rates(g));
  const std::string bad = dir.write(
      "bad.json", R"({"name":"x","memory_gib":1,"tflops_fp32":1,"mem_bw_gbs":1,"intra_bw_gbs":1,)"
                  R"("inter_bw_gbs":1,"attention_tflops":[{"width":64,"tflops":1}]})");
  try {
    load_device_profile(bad);
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("attention_tflops"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("head_dim"), std::string::npos) << e.what();
  }
}

TEST(PlanCpu, RunConfigGivesTheTrainerStep) {
  RunConfig cfg;
  cfg.model = tiny();
  cfg.data.micro_batch = 4;
  cfg.data.seq_len = 16;
  cfg.data.grad_accum = 3;
  const ConfigPlanInput in = plan_input_from_run_config(cfg);
  EXPECT_EQ(in.model.n_embd, 64);
  EXPECT_EQ(in.train.micro_batch, 4);
  EXPECT_EQ(in.train.seq, 16);
  EXPECT_EQ(in.train.global_batch, 12);  // one rank: micro_batch x grad_accum
  EXPECT_EQ(in.train.precision, Precision::FP32);
  EXPECT_EQ(in.train.optimizer, "adamw");
  EXPECT_EQ(in.train.dropout, 0);
  EXPECT_EQ(in.train.checkpointing, Checkpointing::None);
}

TEST(PlanCpu, LoadPlanConfigAppliesOverridesAndLocatesErrors) {
  TempDir dir;
  const std::string yaml =
      "model:\n  family: llama\n  n_layer: 2\n  n_embd: 64\n  n_head: 4\n  n_kv_head: 2\n"
      "  vocab_size: 256\n  context_length: 64\n"
      "data:\n  dir: data\n  micro_batch: 2\n  seq_len: 32\n  grad_accum: 2\n";
  const std::string path = dir.write("run.yaml", yaml);
  const ConfigPlanInput in = load_plan_config(path, {"model.n_layer=3", "data.grad_accum=5"});
  EXPECT_EQ(in.model.family, "llama");
  EXPECT_EQ(in.model.kv_heads(), 2);
  EXPECT_EQ(in.model.n_layer, 3);
  EXPECT_EQ(in.train.global_batch, 10);
  const std::string bad = dir.write("bad.yaml", yaml + "optim:\n  lr: fast\n");
  try {
    load_plan_config(bad, {});
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.yaml"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("lr"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_plan_config(path, {"data.seq_len=999"}), UserError);  // > context_length
}

TEST(PlanCpu, LlamaAndGqaUseTheirOwnTables) {
  ModelConfig m = tiny();
  m.family = "llama";
  m.n_kv_head = 1;  // 4 query heads per KV head
  const TrainOptions t = testing::tiny_train();
  CpuProfile g = cpu_profile().cpu;
  const CpuStepTime base = cpu_microbatch_time(m, t, g, 2, false, 1);
  g.gemm_llama_by_width = {{64, 0.15}};        // 2x the gpt2 table's 0.075 at width 64
  g.attention_gqa_by_head_dim = {{16, 0.08}};  // 2x the MHA table
  const CpuStepTime own = cpu_microbatch_time(m, t, g, 2, false, 1);
  EXPECT_NEAR(own.gemm, base.gemm / 2, 1e-15);
  EXPECT_NEAR(own.attention, base.attention / 2, 1e-15);
  // A GPT-2 model (no GQA) keeps the GPT-2 and MHA tables.
  const CpuStepTime gpt = cpu_microbatch_time(tiny(), t, g, 2, false, 1);
  EXPECT_NEAR(gpt.attention, 2 * 7.0 * 64 * 32 * 64 / 0.04e12, 1e-15);
}

}  // namespace braid::plan
