// Helpers for the model tests: tiny configs of both families, seeded token batches, and
// gradient snapshots to compare bit for bit.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/model_config.h"
#include "core/models/transformer.h"
#include "core/parameter.h"
#include "core/random.h"
#include "core/tensor.h"

namespace braid::model_test {

inline ModelConfig tiny(const std::string& family, int n_layer = 2) {
  ModelConfig c;
  c.family = family;
  c.vocab_size = 11;
  c.context_length = 8;
  c.n_layer = n_layer;
  c.n_embd = 8;
  c.n_head = 2;
  if (family == "llama") {
    c.n_kv_head = 1;
    c.ffn_hidden = 12;
  }
  c.init_std = 0.4f;  // large enough that every nonlinearity matters
  c.seed = 7;
  return c;
}

inline void random_tokens(Tensor& t, int vocab, uint64_t seed) {
  int32_t* p = t.i32();
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] = static_cast<int32_t>(mix64(seed * 1000 + i) % static_cast<uint64_t>(vocab));
}

inline Tensor tokens_of(int64_t B, int64_t T, int vocab, uint64_t seed) {
  Tensor t = Tensor::empty({B, T}, DType::I32);
  random_tokens(t, vocab, seed);
  return t;
}

// name -> a copy of the gradient, for each parameter of `m` (a model or a stage: anything with
// parameters()) that has one; frozen parameters are absent.
template <typename Model>
std::map<std::string, std::vector<float>> grads_of(const Model& m) {
  std::map<std::string, std::vector<float>> g;
  for (const Parameter* p : m.parameters()) {
    const Tensor& t = p->grad_if_any();
    if (t.defined()) g[p->name].assign(t.f32(), t.f32() + t.numel());
  }
  return g;
}

}  // namespace braid::model_test
