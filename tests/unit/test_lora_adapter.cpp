// PEFT adapter files (launch/io/lora_adapter.h): names and config keys, a round trip, and a
// merged model whose logits equal the wrapped (unmerged) model's.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/models/generate.h"
#include "core/models/lora.h"
#include "core/safetensors.h"
#include "kernel_test_util.h"
#include "launch/io/lora_adapter.h"
#include "model_test_util.h"

namespace braid {
namespace {

namespace fs = std::filesystem;
using model_test::tiny;
using model_test::tokens_of;

fs::path scratch_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("braid_lora_" + name + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

class LoraAdapter : public ::testing::TestWithParam<std::string> {};

TEST_P(LoraAdapter, PeftLayoutAndMergedLogitsEqualUnmerged) {
  const ModelConfig cfg = tiny(GetParam(), 2);
  ExecContext& ctx = test_ctx();
  Transformer plain(ctx, cfg), lora(ctx, cfg);
  plain.init_weights();
  lora.init_weights();
  LoraConfig lc;
  lc.rank = 3;
  lc.alpha = 6.0f;
  lc.rslora = true;
  lc.targets = {"all-linear"};
  apply_lora(lora, lc, 2);
  for (Parameter* p : lora.parameters())  // trained-looking adapters: B non-zero
    if (p->trainable) fill_normal(p->value, 0.2f, 4, hash_string(p->name));

  const fs::path dir = scratch_dir(GetParam());
  save_peft_adapter(lora, lc, "/models/base", dir);
  std::ifstream in(dir / "adapter_config.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j.at("r"), 3);
  EXPECT_EQ(j.at("lora_alpha"), 6.0);
  EXPECT_EQ(j.at("use_rslora"), true);
  EXPECT_EQ(j.at("peft_type"), "LORA");
  EXPECT_EQ(j.at("task_type"), "CAUSAL_LM");
  EXPECT_EQ(j.at("bias"), "none");
  EXPECT_EQ(j.at("base_model_name_or_path"), "/models/base");
  EXPECT_EQ(j.at("fan_in_fan_out"), !cfg.is_llama());  // GPT-2's HF linears are Conv1D
  EXPECT_TRUE(j.contains("lora_dropout"));
  const std::vector<std::string> modules =
      cfg.is_llama() ? std::vector<std::string>{"down_proj", "gate_proj", "k_proj", "o_proj",
                                                "q_proj",    "up_proj",   "v_proj"}
                     : std::vector<std::string>{"c_attn", "c_fc", "c_proj"};
  EXPECT_EQ(j.at("target_modules").get<std::vector<std::string>>(), modules);
  SafetensorsFile f = SafetensorsFile::open((dir / "adapter_model.safetensors").string());
  const std::string probe = cfg.is_llama()
                                ? "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"
                                : "base_model.model.transformer.h.0.attn.c_attn.lora_A.weight";
  ASSERT_TRUE(f.contains(probe)) << probe;
  EXPECT_EQ(f.shape(probe), (Shape{3, cfg.n_embd}));
  EXPECT_EQ(f.names().size(), 2u * cfg.n_layer * (cfg.is_llama() ? 7 : 4));

  const PeftAdapter a = load_peft_adapter(dir);
  EXPECT_FLOAT_EQ(a.scale, 6.0f / std::sqrt(3.0f));
  merge_peft_adapter(plain, a);
  const Tensor tok = tokens_of(2, 6, cfg.vocab_size, 1);
  const Tensor h_lora = lora.forward_eval(ctx, tok), h_merged = plain.forward_eval(ctx, tok);
  ASSERT_EQ(h_lora.numel(), h_merged.numel());
  double worst = 0;
  for (int64_t i = 0; i < h_lora.numel(); ++i)
    worst = std::max(worst, std::fabs(double(h_lora.f32()[i]) - h_merged.f32()[i]));
  EXPECT_LT(worst, 2e-5);
  // And the loss head on top: the same loss up to rounding.
  const Tensor tgt = tokens_of(2, 6, cfg.vocab_size, 2);
  EXPECT_NEAR(lora.forward_loss(ctx, tok, tgt).sum, plain.forward_loss(ctx, tok, tgt).sum, 1e-4);
  // KV-cache decoding goes through LoraLinear::infer: greedy tokens equal the merged model's.
  SampleOptions so;
  so.max_new_tokens = 6;
  so.temperature = 0.0f;
  EXPECT_EQ(generate(ctx, lora, {1, 2, 3}, so), generate(ctx, plain, {1, 2, 3}, so));
  // A merge really changed the weights (the comparison above is not base vs base).
  Transformer base(ctx, cfg);
  base.init_weights();
  EXPECT_GT(std::fabs(base.forward_loss(ctx, tok, tgt).sum - plain.forward_loss(ctx, tok, tgt).sum),
            1e-3);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Families, LoraAdapter, ::testing::Values("gpt2", "llama"));

TEST(LoraAdapterFiles, BadAdapterDirectoriesAreUserErrors) {
  const fs::path dir = scratch_dir("bad");
  fs::create_directories(dir);
  EXPECT_THROW(load_peft_adapter(dir), UserError);  // no adapter_config.json
  std::ofstream(dir / "adapter_config.json") << R"({"peft_type": "IA3", "r": 2, "lora_alpha": 4})";
  try {
    load_peft_adapter(dir);
    ADD_FAILURE() << "IA3 accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("peft_type"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace braid
