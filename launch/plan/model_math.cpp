// Per-layer parameter, LoRA and FLOP counts.
#include "launch/plan/model_math.h"

#include <utility>

#include "core/error.h"

namespace braid::plan {

// The per-part counts are differences of ModelConfig's own totals (num_params,
// num_matmul_params), so the planner has no second copy of the model's parameter shapes: a
// change to what a block holds changes both at once.
namespace {
ModelConfig with_layers(const ModelConfig& m, int layers) {
  ModelConfig c = m;
  c.n_layer = layers;
  return c;
}
}  // namespace

int64_t block_params(const ModelConfig& m) {
  return with_layers(m, 1).num_params() - with_layers(m, 0).num_params();
}

int64_t block_matmul_params(const ModelConfig& m) {
  return with_layers(m, 1).num_matmul_params() - with_layers(m, 0).num_matmul_params();
}

int64_t embedding_params(const ModelConfig& m) {
  // Token embedding: with no blocks, the matmul parameters are the vocabulary projection (V x C).
  const ModelConfig none = with_layers(m, 0);
  ModelConfig no_positions = none;
  no_positions.context_length =
      0;  // gpt2's learned position table is the only part that scales with it
  return none.num_matmul_params() + (none.num_params() - no_positions.num_params());
}

int64_t head_params(const ModelConfig& m) {
  // What a block-less model holds beyond its embedding: the untied head and the final norm.
  return with_layers(m, 0).num_params() - embedding_params(m);
}

std::vector<std::pair<int64_t, int64_t>> targeted_projections(
    const ModelConfig& m, const std::vector<std::string>& targets) {
  const int64_t C = m.n_embd, F = m.ffn();
  const int64_t kv = static_cast<int64_t>(m.kv_heads()) * m.head_dim();
  std::vector<std::string> list = targets;
  if (list.size() == 1 && list[0] == "all") {
    list = {"q", "k", "v", "o", "up", "down"};
    if (m.is_llama()) list.push_back("gate");
  }
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const std::string& t : list) {
    if (t == "q" || t == "o")
      out.emplace_back(C, C);
    else if (t == "k" || t == "v")
      out.emplace_back(C, kv);
    else if (t == "up" || (t == "gate" && m.is_llama()))
      out.emplace_back(C, F);
    else if (t == "down")
      out.emplace_back(F, C);
    else
      user_error(
          "LoRA target '{}' is unknown for family {}; expected q, k, v, o, up, down{}, "
          "or all",
          t, m.family, m.is_llama() ? ", gate" : "");
  }
  return out;
}

int64_t lora_params_per_block(const ModelConfig& m, int rank,
                              const std::vector<std::string>& targets) {
  int64_t p = 0;
  for (const auto& [in, out] : targeted_projections(m, targets)) p += rank * (in + out);
  return p;
}

int64_t lora_base_params_per_block(const ModelConfig& m, const std::vector<std::string>& targets) {
  int64_t p = 0;
  for (const auto& [in, out] : targeted_projections(m, targets)) p += in * out;
  return p;
}

bool uses_dropout(const ModelConfig& m, const TrainOptions& t) {
  return t.dropout < 0 ? !m.is_llama() : t.dropout != 0;
}

namespace {
double lora_block(const ModelConfig& m, const TrainOptions& t) {
  return t.lora_rank > 0
             ? static_cast<double>(lora_params_per_block(m, t.lora_rank, t.lora_targets))
             : 0.0;
}
}  // namespace

double block_model_flops_per_token(const ModelConfig& m, const TrainOptions& t, int64_t s) {
  const double base = static_cast<double>(block_matmul_params(m));
  const double attn = 12.0 * m.n_embd * static_cast<double>(s);
  if (t.lora_rank > 0) return 4.0 * base + 6.0 * lora_block(m, t) + attn;
  return 6.0 * base + attn;
}

double block_hw_flops_per_token(const ModelConfig& m, const TrainOptions& t, int64_t s) {
  const double f = block_model_flops_per_token(m, t, s);
  const double attn_fwd = 4.0 * m.n_embd * static_cast<double>(s);
  switch (t.checkpointing) {
    case Checkpointing::None:
      return f;
    case Checkpointing::Selective:
      return f + attn_fwd;
    case Checkpointing::Full:
      return f + 2.0 * (static_cast<double>(block_matmul_params(m)) + lora_block(m, t)) + attn_fwd;
  }
  return f;
}

double block_attention_flops_per_token(const ModelConfig& m, const TrainOptions& t, int64_t s) {
  const double attn = 12.0 * m.n_embd * static_cast<double>(s);
  return t.checkpointing == Checkpointing::None ? attn : attn + attn / 3.0;
}

double head_flops_per_token(const ModelConfig& m, const TrainOptions& t) {
  const double head = static_cast<double>(m.vocab_size) * m.n_embd;
  // With LoRA the head is frozen: forward and input gradient only.
  return (t.lora_rank > 0 ? 4.0 : 6.0) * head;
}

}  // namespace braid::plan
