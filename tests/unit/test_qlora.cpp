// QLoRA (lora.base_quant): a LoRA model whose base linears hold only NF4/int8 weights computes
// what the same model with those weights dequantised into full precision computes, its adapters
// get the same gradients, it trains, its base takes ~0.5 bytes per weight, and merging its
// adapters into the read-back base (merge-lora) gives a plain model with the same logits.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "core/kernels/quantize.h"
#include "core/models/lora.h"
#include "core/models/quantized_linear.h"
#include "kernel_test_util.h"
#include "launch/io/lora_adapter.h"
#include "model_test_util.h"
#include "optim/adamw.h"

namespace braid {
namespace {

using model_test::tiny;
using model_test::tokens_of;

LoraConfig qlora_cfg(BaseQuant q) {
  LoraConfig c;
  c.rank = 2;
  c.alpha = 4.0f;
  c.targets = {"all-linear"};
  c.base_quant = q;
  return c;
}

// Gives every lora_B a deterministic nonzero value so that the adapters take part.
void set_b(Transformer& m) {
  for (Parameter* p : m.parameters())
    if (p->name.find(".lora_B.") != std::string::npos)
      for (int64_t i = 0; i < p->value.numel(); ++i)
        p->value.f32()[i] = 0.01f * static_cast<float>((i % 7) - 3);
}

// ref: the base weights of `m`'s targets replaced by their quantised-then-dequantised values.
void dequantised_reference(ExecContext& ctx, Transformer& ref, const LoraConfig& lc) {
  const QuantCode code = lc.base_quant == BaseQuant::Nf4 ? QuantCode::Nf4 : QuantCode::Int8;
  for (Parameter* p : ref.parameters()) {
    if (p->trainable || p->name.find(".weight") == std::string::npos || p->value.ndim() != 2)
      continue;
    const std::string path = p->name.substr(0, p->name.size() - 7);
    if (!lora_targets(path, lc.targets) || path.find("wte") != std::string::npos ||
        path.find("lm_head") != std::string::npos || path.find("embed") != std::string::npos)
      continue;
    const QuantizedWeight q =
        quantize_weight(ctx, p->value, code, lc.quant_block_size, lc.double_quant);
    dequantize_weight(ctx, p->value, q);
  }
}

class Qlora : public ::testing::TestWithParam<BaseQuant> {};

TEST_P(Qlora, MatchesTheDequantisedModelAndTrains) {
  const ModelConfig cfg = tiny("llama", 2);
  ExecContext& ctx = test_ctx();
  const LoraConfig lc = qlora_cfg(GetParam());
  Transformer m(ctx, cfg), ref(ctx, cfg);
  m.init_weights();
  ref.init_weights();
  apply_lora(m, lc, 3);
  apply_lora(ref, lc, 3);
  dequantised_reference(ctx, ref, lc);
  const int n = quantize_lora_bases(ctx, m, lc);
  EXPECT_EQ(n, 7 * cfg.n_layer);
  set_b(m);
  set_b(ref);
  // Only the adapters and the untargeted frozen weights remain parameters.
  for (Parameter* p : m.parameters())
    if (p->name.find("_proj.weight") != std::string::npos)
      ADD_FAILURE() << p->name << " is still held in full precision";

  const Tensor tok = tokens_of(2, 6, cfg.vocab_size, 1), tgt = tokens_of(2, 6, cfg.vocab_size, 2);
  const double lq = m.forward_loss(ctx, tok, tgt).sum, lr = ref.forward_loss(ctx, tok, tgt).sum;
  EXPECT_NEAR(lq, lr, 1e-5 * std::fabs(lr));
  m.zero_grad(ctx);
  ref.zero_grad(ctx);
  {
    MicroBatch a(ctx), b(ctx);
    m.forward_backward(a, tok, tgt, 1.0f / 12);
    ref.forward_backward(b, tok, tgt, 1.0f / 12);
  }
  std::map<std::string, Parameter*> rp;
  for (Parameter* p : ref.parameters()) rp[p->name] = p;
  int compared = 0;
  for (Parameter* p : m.parameters()) {
    if (!p->trainable) continue;
    const Tensor g = p->grad(), gr = rp.at(p->name)->grad();
    double scale = 0;
    for (int64_t i = 0; i < gr.numel(); ++i)
      scale = std::max(scale, std::fabs(double(gr.f32()[i])));
    for (int64_t i = 0; i < g.numel(); ++i)
      ASSERT_NEAR(g.f32()[i], gr.f32()[i], 1e-4 * scale + 1e-7) << p->name << " " << i;
    ++compared;
  }
  EXPECT_EQ(compared, 2 * 7 * cfg.n_layer);

  OptimConfig oc;
  oc.lr = 1e-2f;
  AdamW opt(ctx, m.parameters(), oc);
  double first = 0, last = 0;
  for (int s = 0; s < 15; ++s) {
    m.zero_grad(ctx);
    MicroBatch mb(ctx);
    const double loss = m.forward_backward(mb, tok, tgt, 1.0f / 12).sum;
    if (s == 0) first = loss;
    last = loss;
    opt.step(1e-2f);
  }
  EXPECT_LT(last, 0.8 * first);
}

INSTANTIATE_TEST_SUITE_P(Codes, Qlora, ::testing::Values(BaseQuant::Nf4, BaseQuant::Int8));

// An NF4 base with double quantisation: ~0.5 bytes per weight plus constants (QLoRA: 4.127
// bits), and the full-precision weights are released.
TEST(QloraMemory, Nf4BaseTakesHalfAByteAWeight) {
  ModelConfig cfg = tiny("llama", 2);
  cfg.n_embd = 64;  // 0.5 bytes + constants; the 4.127-bit figure: Quantize.DoubleQuantisedWeight
  ExecContext& ctx = test_ctx();
  Transformer m(ctx, cfg);
  m.init_weights();
  const LoraConfig lc = qlora_cfg(BaseQuant::Nf4);
  apply_lora(m, lc, 3);
  quantize_lora_bases(ctx, m, lc);
  int64_t bytes = 0, weights = 0;
  m.visit([&](Module& mod) {
    if (auto* q = dynamic_cast<QuantizedLinear*>(&mod)) {
      bytes += q->weight.bytes();
      weights += q->weight.numel();
    }
  });
  ASSERT_GT(weights, 0);
  // Exactly: the packed codes, a byte per 64-block, an f32 per 256 blocks and the offset.
  int64_t expected = 0;
  m.visit([&](Module& mod) {
    if (auto* q = dynamic_cast<QuantizedLinear*>(&mod)) {
      const int64_t n = q->weight.numel(), blocks = (n + 63) / 64;
      expected += (n + 1) / 2 + blocks + 4 * ((blocks + 255) / 256) + 4;
    }
  });
  EXPECT_EQ(bytes, expected);
}

// merge-lora from a quantised base: the plain model whose targeted weights are the quantised
// base read back (quantized_base_readback) with W += s B A folded in computes the QLoRA model's
// logits up to f32 rounding; folding into the original full-precision base does not.
TEST_P(Qlora, MergedIntoTheReadBackBaseGivesTheSameLogits) {
  const ModelConfig cfg = tiny("llama", 2);
  ExecContext& ctx = test_ctx();
  const LoraConfig lc = qlora_cfg(GetParam());
  Transformer q(ctx, cfg), merged(ctx, cfg), unquantised(ctx, cfg);
  for (Transformer* t : {&q, &merged, &unquantised}) t->init_weights();
  apply_lora(q, lc, 3);
  std::vector<std::string> bases;  // the targeted weights, before quantisation takes them
  for (Parameter* p : q.parameters())
    if (!p->trainable && p->name.ends_with("_proj.weight")) bases.push_back(p->name);
  quantize_lora_bases(ctx, q, lc);
  set_b(q);
  ASSERT_EQ(bases.size(), 7u * cfg.n_layer);
  for (const std::string& n : bases) {
    Parameter* p = merged.find_parameter(n);
    p->value.copy_from(quantized_base_readback(ctx, p->value, lc));
  }
  PeftAdapter a;
  a.scale = lc.alpha / static_cast<float>(lc.rank);
  for (Parameter* p : q.parameters())
    if (p->trainable) a.tensors.emplace_back(p->name, p->value);
  merge_peft_adapter(merged, a);
  merge_peft_adapter(unquantised, a);
  const Tensor tok = tokens_of(2, 6, cfg.vocab_size, 1);
  const Tensor hq = q.forward_eval(ctx, tok), hm = merged.forward_eval(ctx, tok),
               hu = unquantised.forward_eval(ctx, tok);
  double worst = 0, off = 0, scale = 0;
  for (int64_t i = 0; i < hq.numel(); ++i) {
    worst = std::max(worst, std::fabs(double(hq.f32()[i]) - hm.f32()[i]));
    off = std::max(off, std::fabs(double(hq.f32()[i]) - hu.f32()[i]));
    scale = std::max(scale, std::fabs(double(hq.f32()[i])));
  }
  EXPECT_LT(worst, 2e-5 * scale) << "scale " << scale;
  EXPECT_GT(off, 100 * 2e-5 * scale) << "the quantisation error should show without read-back";
}

}  // namespace
}  // namespace braid
