// Sampling loop: prefill the prompt once, then decode one token at a time.
#include "core/models/generate.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/random.h"

namespace braid {

int32_t sample_token(const float* logits, int64_t V, float temperature, int top_k, double u) {
  if (temperature <= 0.0f)
    return static_cast<int32_t>(std::max_element(logits, logits + V) - logits);
  std::vector<int32_t> idx(static_cast<size_t>(V));
  std::iota(idx.begin(), idx.end(), 0);
  int64_t k = (top_k > 0 && top_k < V) ? top_k : V;
  // Highest logits first; ties by index so the choice is deterministic.
  auto better = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), better);
  const double mx = logits[idx[0]];
  std::vector<double> p(static_cast<size_t>(k));
  double total = 0.0;
  for (int64_t i = 0; i < k; ++i) {
    p[i] = std::exp((logits[idx[i]] - mx) / temperature);
    total += p[i];
  }
  double target = u * total, acc = 0.0;
  for (int64_t i = 0; i < k; ++i) {
    acc += p[i];
    if (target < acc) return idx[i];
  }
  return idx[k - 1];
}

std::vector<int32_t> generate(ExecContext& ctx, Transformer& model,
                              const std::vector<int32_t>& prompt, const SampleOptions& opt,
                              const std::function<void(int32_t)>& on_token) {
  const ModelConfig& cfg = model.config();
  BRAID_USER_CHECK(!prompt.empty(), "the prompt encodes to no tokens; give a non-empty prompt");
  BRAID_USER_CHECK(static_cast<int64_t>(prompt.size()) < cfg.context_length,
                   "the prompt has {} tokens; the model's context is {}", prompt.size(),
                   cfg.context_length);
  for (int32_t t : prompt)
    BRAID_USER_CHECK(t >= 0 && t < cfg.vocab_size, "prompt token {} is outside the vocabulary ({})",
                     t, cfg.vocab_size);
  const int64_t max_len = std::min<int64_t>(
      cfg.context_length, static_cast<int64_t>(prompt.size()) + opt.max_new_tokens);
  KVCache cache = model.make_cache(ctx, max_len);
  Tensor p = Tensor::from_vector_i32(prompt, {1, static_cast<int64_t>(prompt.size())});
  Tensor logits = model.decode(ctx, ctx.to_device(p), cache).to_host();
  Rng rng(opt.seed);
  std::vector<int32_t> out;
  for (int i = 0; i < opt.max_new_tokens; ++i) {
    const int32_t next =
        sample_token(logits.f32(), cfg.vocab_size, opt.temperature, opt.top_k, rng.next_double());
    out.push_back(next);
    if (on_token) on_token(next);
    if (i + 1 == opt.max_new_tokens || cache.len >= max_len) break;  // done, or context full
    if (opt.stop_token && next == *opt.stop_token) break;
    logits =
        model.decode(ctx, ctx.to_device(Tensor::from_vector_i32({next}, {1, 1})), cache).to_host();
  }
  return out;
}

}  // namespace braid
