// ZeRO memory (Rajbhandari et al. 2020): the model states of every ZeRO stage against the
// paper's Table 1, and ZeRO-3's gathered working buffers as a category of their own.
#include <gtest/gtest.h>

#include <cmath>

#include "launch/plan/gpu_table.h"
#include "launch/plan/memory_model.h"
#include "launch/plan/model_math.h"
#include "launch/plan/report.h"
#include "launch/plan/time_model.h"

namespace braid::plan {

namespace {

ModelConfig gpt(int layers, int hidden, int heads) {
  ModelConfig m;
  m.family = "gpt2";
  m.n_layer = layers;
  m.n_embd = hidden;
  m.n_head = heads;
  m.vocab_size = 51200;
  m.context_length = 2048;
  return m;
}

// Mixed-precision AdamW as the paper counts it: 2-byte weights and gradients, K = 12 bytes of
// optimizer state (fp32 master, momentum, variance) per parameter.
TrainOptions mixed_adam(int zero, int dp) {
  TrainOptions t;
  t.precision = Precision::BF16;
  t.grad_precision = Precision::BF16;
  t.optimizer = "adamw";
  t.zero = zero;
  t.global_batch = dp;
  t.seq = 2048;
  return t;
}

MemoryBreakdown memory(const ModelConfig& m, int zero, int dp) {
  return training_memory(m, mixed_adam(zero, dp), {dp, 1, 1, 1, "1f1b"}, find_gpu("a100-80gb"));
}

}  // namespace

// Table 1 of the ZeRO paper: per-device model states in GB (1e9 bytes) of a 7.5B, a 128B and a
// 1T model under P_os (ZeRO-1), P_os+g (ZeRO-2) and P_os+g+p (ZeRO-3) for N_d = 1 ... 1024.
// The table is linear in the parameter count, so each model here (a GPT shape of about that size)
// is compared with the table scaled to its own count. Within 1 %, or within half a unit of the
// last printed digit where the table prints fewer digits (0.12 GB is 16 x 7.5e9 / 1024 = 0.117).
TEST(PlanZero, PaperTable1ModelStates) {
  struct Column {
    ModelConfig model;
    double paper_params;
    // Rows N_d = 1, 4, 16, 64, 256, 1024; each P_os, P_os+g, P_os+g+p.
    double gb[6][3];
    double printed_unit[6][3];  // the last printed digit's unit of each cell
  };
  const int nd[6] = {1, 4, 16, 64, 256, 1024};
  const Column columns[] = {
      {gpt(36, 4096, 32),
       7.5e9,
       {{120, 120, 120},
        {52.5, 41.3, 30},
        {35.6, 21.6, 7.5},
        {31.4, 16.6, 1.88},
        {30.4, 15.4, 0.47},
        {30.1, 15.1, 0.12}},
       {{1, 1, 1},
        {0.1, 0.1, 1},
        {0.1, 0.1, 0.1},
        {0.1, 0.1, 0.01},
        {0.1, 0.1, 0.01},
        {0.1, 0.1, 0.01}}},
      {gpt(70, 12288, 96),
       128e9,
       {{2048, 2048, 2048},
        {896, 704, 512},
        {608, 368, 128},
        {536, 284, 32},
        {518, 263, 8},
        {513, 257, 2}},
       {{1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}}},
      {gpt(128, 25600, 160),
       1e12,
       {{16000, 16000, 16000},
        {7000, 5500, 4000},
        {4750, 2875, 1000},
        {4187, 2218, 250},
        {4046, 2054, 62.5},
        {4011, 2013, 15.6}},
       {{1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 0.1}}},
  };
  for (const Column& c : columns) {
    const double scale = static_cast<double>(c.model.num_params()) / c.paper_params;
    ASSERT_NEAR(scale, 1.0, 0.035) << c.paper_params;  // a model of about the paper's size
    for (int row = 0; row < 6; ++row) {
      for (int stage = 1; stage <= 3; ++stage) {
        const MemoryBreakdown mem = memory(c.model, stage, nd[row]);
        const double paper = c.gb[row][stage - 1] * 1e9 * scale;
        const double tol =
            std::max(0.01, 0.5 * c.printed_unit[row][stage - 1] / c.gb[row][stage - 1]);
        EXPECT_NEAR(mem.model_states() / paper, 1.0, tol)
            << c.paper_params << " params, N_d " << nd[row] << ", ZeRO-" << stage << ": "
            << mem.model_states() / scale / 1e9 << " GB per paper-size model vs "
            << c.gb[row][stage - 1];
      }
    }
  }
}

// ZeRO-3's working buffers are not model states: the whole weights of the block being computed
// and of the prefetched ones, and one block's whole gradient before its reduce-scatter. They do
// not shrink with N_d, grow with the prefetch depth, and count in the total.
TEST(PlanZero, GatheredWorkingBuffersApartFromModelStates) {
  ModelConfig m = gpt(36, 4096, 32);
  m.vocab_size = 32000;  // a block (201M) outweighs the embedding (140M): blocks set the size
  const double block = static_cast<double>(block_params(m));
  ASSERT_GT(block, static_cast<double>(embedding_params(m) + head_params(m)));
  TrainOptions t = mixed_adam(3, 1024);
  const Layout l{1024, 1, 1, 1, "1f1b"};
  const GpuSpec g = find_gpu("a100-80gb");
  for (int prefetch : {0, 1, 2}) {
    t.zero3_prefetch = prefetch;
    const MemoryBreakdown mem = training_memory(m, t, l, g);
    EXPECT_DOUBLE_EQ(mem.gathered, (1 + prefetch) * 2 * block + 2 * block) << prefetch;
    EXPECT_NEAR(mem.model_states(), 16.0 * m.num_params() / 1024, 1.0);
    EXPECT_DOUBLE_EQ(mem.total(),
                     mem.model_states() + mem.gathered + mem.activations + mem.comm + mem.overhead);
  }
  // Below ZeRO-3 nothing is gathered: every rank holds the whole weights.
  EXPECT_EQ(training_memory(m, mixed_adam(2, 1024), l, g).gathered, 0.0);
  // Under tensor parallelism a rank gathers only its own 1/t slice of a block.
  t.zero3_prefetch = 1;
  const MemoryBreakdown tp8 = training_memory(m, t, {128, 8, 1, 1, "1f1b"}, g);
  EXPECT_DOUBLE_EQ(tp8.gathered, 3 * 2 * block / 8);
}

// A Llama vocabulary makes the embedding and the untied head (one unit on a single stage, as
// FSDP's root module) larger than a block: the largest unit a stage gathers sets the buffer.
TEST(PlanZero, LargestGatheredUnitSetsTheBuffer) {
  ModelConfig m;
  m.family = "llama";
  m.n_layer = 32;
  m.n_embd = 4096;
  m.n_head = 32;
  m.n_kv_head = 8;
  m.ffn_hidden = 14336;
  m.vocab_size = 128256;
  m.context_length = 8192;
  const double embed = static_cast<double>(embedding_params(m));
  ASSERT_GT(embed, static_cast<double>(block_params(m)));  // 525M against 218M
  TrainOptions t = mixed_adam(3, 8);
  t.seq = 8192;
  const MemoryBreakdown mem = training_memory(m, t, {8, 1, 1, 1, "1f1b"}, find_gpu("h100-sxm"));
  const double edge = embed + static_cast<double>(head_params(m));
  EXPECT_DOUBLE_EQ(mem.gathered, 2 * 2 * edge + 2 * edge);
}

}  // namespace braid::plan

namespace braid::plan {

// The report shows ZeRO-3's own shard, the model states and the gathered buffers on their own
// lines, and the JSON has both categories.
TEST(PlanZero, ReportShowsModelStatesAndGatheredApart) {
  ModelConfig m = gpt(36, 4096, 32);
  Cluster c;
  c.gpu = find_gpu("a100-80gb");
  c.nodes = 8;
  c.intra_bw_gbs = c.gpu.intra_bw_gbs;
  c.inter_bw_gbs = c.gpu.inter_bw_gbs;
  TrainOptions t = mixed_adam(3, 64);
  t.zero3_prefetch = 2;
  const PlanResult r = predict(m, t, {64, 1, 1, 1, "1f1b"}, c);
  const std::string text = plan_text(m, c, r);
  EXPECT_NE(text.find("weights (own shard)"), std::string::npos) << text;
  EXPECT_NE(text.find("= model states"), std::string::npos) << text;
  EXPECT_NE(text.find("gathered, 2+1 units (working)"), std::string::npos) << text;
  const nlohmann::json j = plan_json(r);
  EXPECT_DOUBLE_EQ(j["memory_bytes"]["model_states"].get<double>(), r.memory.model_states());
  EXPECT_DOUBLE_EQ(j["memory_bytes"]["zero3_gathered"].get<double>(), r.memory.gathered);
  EXPECT_EQ(j["layout"]["zero3_prefetch"].get<int>(), 2);
}

}  // namespace braid::plan
