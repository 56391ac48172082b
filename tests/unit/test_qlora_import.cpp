// QLoRA's base quantised while it is imported, tensor by tensor (launch/train/model_passes.h's
// build_model): the same model as quantising the whole imported base, without ever holding the
// base in full precision.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <string>

#include "core/kernels/quantize.h"
#include "core/models/lora.h"
#include "core/models/quantized_linear.h"
#include "data/file_util.h"
#include "data_test_util.h"
#include "launch/io/hf_export.h"
#include "launch/io/model_io.h"
#include "launch/train/model_passes.h"
#include "model_test_util.h"

namespace braid {
namespace {

ModelConfig model_of(const std::string& family) {
  ModelConfig c = model_test::tiny(family, 3);
  c.vocab_size = 96;
  c.n_embd = 64;
  c.n_head = 4;
  if (family == "llama") {
    c.n_kv_head = 2;
    c.ffn_hidden = 160;
  }
  return c;
}

RunConfig qlora_run(const ModelConfig& m, const std::string& init_from) {
  RunConfig r;
  r.model = m;
  r.lora.rank = 4;
  r.lora.alpha = 8.0f;
  r.lora.targets = {"all-linear"};
  r.lora.base_quant = BaseQuant::Nf4;
  r.lora.init_from = init_from;
  return r;
}

// The base's weights as a QLoRA run quantised them: every parameter's value, and each quantised
// linear's weight read back to f32.
std::map<std::string, std::vector<float>> state_of(ExecContext& ctx, Transformer& m) {
  std::map<std::string, std::vector<float>> out;
  auto put = [&](const std::string& name, const Tensor& t) {
    const Tensor h = t.to(DType::F32);
    out[name].assign(h.f32(), h.f32() + h.numel());
  };
  for (Parameter* p : m.parameters()) put(p->name, p->value);
  m.visit([&](Module& mod) {
    auto* q = dynamic_cast<QuantizedLinear*>(&mod);
    if (!q) return;
    Tensor w = ctx.zeros(q->weight.shape, DType::F32);
    dequantize_weight(ctx, w, q->weight);
    put(mod.path() + ".weight (quantised)", w);
  });
  return out;
}

class QloraImport : public ::testing::TestWithParam<const char*> {};

TEST_P(QloraImport, QuantisesEachTensorAsItIsReadWithTheSameResult) {
  testing::TempDir dir("qlora_import");
  ExecContext ctx;
  const ModelConfig mc = model_of(GetParam());
  int64_t largest = 0;  // bytes of the largest whole tensor in f32
  {
    Transformer src(ctx, mc);
    src.init_weights();
    for (const Parameter* p : src.parameters())
      largest = std::max<int64_t>(largest, static_cast<int64_t>(p->value.nbytes()));
    HfExport how;
    how.dtype = DType::BF16;
    how.max_shard_bytes = 40000;  // several files, as a large model's
    write_hf_model(dir.path(), mc, named_weights(src), how);
  }
  const RunConfig cfg = resolve_init_from(qlora_run(mc, dir.path().string()));

  // The whole base imported in f32, then quantised (what the trainer did before).
  ctx.allocator().reset_peaks();
  Transformer whole(ctx, cfg.model);
  whole.init_weights();
  init_weights_from(whole, dir.path().string());
  apply_training_passes(whole, cfg, false);
  quantize_lora_bases(ctx, whole, cfg.lora);
  const int64_t whole_peak =
      ctx.allocator().stats().peak_bytes[static_cast<int>(MemCategory::Weights)];
  const auto want = state_of(ctx, whole);

  ctx.allocator().reset_peaks();
  const int64_t before = ctx.allocator().stats().live_bytes[static_cast<int>(MemCategory::Weights)];
  std::unique_ptr<Transformer> streamed = build_model(ctx, cfg, {}, "", {}, 0, false);
  const MemoryStats st = ctx.allocator().stats();
  const int64_t held = st.live_bytes[static_cast<int>(MemCategory::Weights)] - before;
  const int64_t peak = st.peak_bytes[static_cast<int>(MemCategory::Weights)] - before;

  EXPECT_EQ(quantized_base_bytes(*streamed).linears, quantized_base_bytes(whole).linears);
  const auto got = state_of(ctx, *streamed);
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, v] : want) {
    ASSERT_TRUE(got.count(name)) << name;
    EXPECT_EQ(0, std::memcmp(got.at(name).data(), v.data(), v.size() * sizeof(float))) << name;
  }
  // At most one tensor in f32 beyond what the model keeps; the whole import held all of them.
  EXPECT_LE(peak, held + largest);
  EXPECT_GT(whole_peak, held + 2 * largest);
  int64_t f32_model = 0;
  const Transformer plain(ctx, mc);
  for (const Parameter* p : plain.parameters())
    f32_model += static_cast<int64_t>(p->value.nbytes());
  EXPECT_LT(held, f32_model / 2);  // the quantised base is what stays
}

INSTANTIATE_TEST_SUITE_P(Families, QloraImport, ::testing::Values("llama", "gpt2"));

TEST(QloraImport, RefusesABaseThatLacksATensor) {
  testing::TempDir dir("qlora_import_missing");
  ExecContext ctx;
  const ModelConfig mc = model_of("llama");
  {
    Transformer src(ctx, mc);
    src.init_weights();
    write_hf_model(dir.path(), mc, named_weights(src), HfExport{});
  }
  // config.json says one block more than the files hold.
  nlohmann::json j = read_json_file(dir.file("config.json"), "config");
  j["num_hidden_layers"] = mc.n_layer + 1;
  std::ofstream(dir.file("config.json")) << j.dump();
  const RunConfig cfg = resolve_init_from(qlora_run(mc, dir.path().string()));
  const std::string msg =
      testing::user_error_of([&] { build_model(ctx, cfg, {}, "", {}, 0, false); });
  EXPECT_NE(msg.find("model.layers.3."), std::string::npos) << msg;
}

}  // namespace
}  // namespace braid
