// Size limits checked before a model is allocated: every dimension in a range the kernels'
// int arithmetic can hold, and the parameters (with training state) in this machine's memory.
#pragma once

#include <cstdint>

#include "core/model_config.h"

namespace braid {

// Largest value braid accepts for one model dimension (vocab_size, n_embd, context_length,
// ffn_hidden): products of two such values and small factors stay inside int64, and 8 x the
// width inside int.
inline constexpr int64_t kMaxModelDim = int64_t{1} << 24;
inline constexpr int64_t kMaxLayers = int64_t{1} << 16;

// Physical memory of this machine in bytes (0 when unknown).
uint64_t physical_memory_bytes();

// Throws braid::ConfigError keyed by the model field ("vocab_size", "n_layer", ...) that is out
// of range, or that contributes most to a parameter count whose `bytes_per_param` bytes each
// (16 for training: weights, gradients, two AdamW moments; 4 to load for inference) exceed
// the machine's memory. The message gives the sizes in 64-bit arithmetic. Call after
// ModelConfig::validate() and before building a Transformer.
void check_model_fits(const ModelConfig& cfg, int bytes_per_param);

}  // namespace braid
