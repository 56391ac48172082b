// Size arithmetic of one transformer layer used by the memory and time models.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/model_config.h"
#include "launch/plan/plan_types.h"

namespace braid::plan {

// Parameters of one block (norms and biases included).
int64_t block_params(const ModelConfig& m);
// Parameters of one block that take part in matmuls.
int64_t block_matmul_params(const ModelConfig& m);
// Token embedding (+ learned positions for gpt2).
int64_t embedding_params(const ModelConfig& m);
// LM head weights (0 when tied) + final norm.
int64_t head_params(const ModelConfig& m);

// Trainable LoRA parameters of one block: rank * (d_in + d_out) per targeted projection.
// Targets: q, k, v, o, gate (llama only), up, down; "all" expands to every projection.
// Throws UserError on an unknown target.
int64_t lora_params_per_block(const ModelConfig& m, int rank,
                              const std::vector<std::string>& targets);

// (d_in, d_out) of each projection of one block that LoRA `targets` names (as
// lora_params_per_block reads them).
std::vector<std::pair<int64_t, int64_t>> targeted_projections(
    const ModelConfig& m, const std::vector<std::string>& targets);

// Weights of one block's targeted projections (d_in * d_out each): what a quantised LoRA base
// (lora.base_quant) stores quantised; same targets as lora_params_per_block.
int64_t lora_base_params_per_block(const ModelConfig& m, const std::vector<std::string>& targets);

// Dropout on (gpt2 default) or off (llama default).
bool uses_dropout(const ModelConfig& m, const TrainOptions& t);

// FLOPs of one block per token, forward + backward, at sequence length s, as the model needs
// them (6 per matmul parameter, 12*h*s for attention scores and values; PaLM appendix B).
// With LoRA the frozen base skips its weight gradients (4 per base parameter).
double block_model_flops_per_token(const ModelConfig& m, const TrainOptions& t, int64_t s);
// The same plus recomputation: full adds a forward of the block, selective adds the forward of
// the attention core (Korthikanti et al. 2022).
double block_hw_flops_per_token(const ModelConfig& m, const TrainOptions& t, int64_t s);
// The attention-core part of block_hw_flops_per_token: 12*h*s, + 4*h*s when recomputed.
double block_attention_flops_per_token(const ModelConfig& m, const TrainOptions& t, int64_t s);
// LM head per token (fwd + bwd); never recomputed.
double head_flops_per_token(const ModelConfig& m, const TrainOptions& t);

}  // namespace braid::plan
