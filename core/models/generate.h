// Autoregressive sampling with a KV cache: temperature, top-k, seeded.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "core/models/transformer.h"

namespace braid {

struct SampleOptions {
  int max_new_tokens = 100;
  float temperature = 1.0f;  // 0: greedy
  int top_k = 0;             // 0: whole vocabulary
  uint64_t seed = 0;
  // Sampling stops after this token (it is returned and passed to on_token like any other).
  std::optional<int32_t> stop_token;
};

// Samples up to max_new_tokens after the prompt (stops early at the context length).
// on_token is called with each new token as it is produced (streaming output).
std::vector<int32_t> generate(ExecContext& ctx, Transformer& model,
                              const std::vector<int32_t>& prompt, const SampleOptions& opt,
                              const std::function<void(int32_t)>& on_token = {});

// Picks a token from logits (V) with temperature and top-k; u is a uniform draw in [0, 1).
int32_t sample_token(const float* logits, int64_t V, float temperature, int top_k, double u);

}  // namespace braid
