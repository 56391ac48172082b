// Helpers for the multi-rank model tests: the single-process reference (the whole model on
// this rank), gradients by name, and fixed batches every rank can make for itself.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "core/models/transformer.h"
#include "optim/adamw.h"
#include "tests/unit/model_test_util.h"

namespace braid::test {

using Grads = std::map<std::string, std::vector<float>>;

inline std::vector<float> values_of(const Tensor& t) {
  return std::vector<float>(t.f32(), t.f32() + t.numel());
}

inline Grads grads_of(const std::vector<Parameter*>& params) {
  Grads g;
  for (Parameter* p : params)
    if (p->has_grad()) g[p->name] = values_of(p->grad_if_any());
  return g;
}

// The micro-batches of step `step`: m of (B, T), seeded by (step, mb).
struct Batches {
  std::vector<Tensor> tokens, targets;
};
inline Batches batches(const ModelConfig& cfg, int m, int64_t B, int64_t T, int step) {
  Batches b;
  for (int i = 0; i < m; ++i) {
    b.tokens.push_back(model_test::tokens_of(B, T, cfg.vocab_size, 1000 * step + 2 * i + 1));
    b.targets.push_back(model_test::tokens_of(B, T, cfg.vocab_size, 1000 * step + 2 * i + 2));
  }
  return b;
}

// The whole model on one rank: one step of gradient accumulation over the batches.
inline LossSum reference_step(ExecContext& ctx, Transformer& whole, const Batches& b,
                              float grad_scale) {
  LossSum l;
  for (size_t i = 0; i < b.tokens.size(); ++i) {
    MicroBatch mb(ctx);
    const LossSum s = whole.forward_backward(mb, b.tokens[i], b.targets[i], grad_scale);
    l.sum += s.sum;
    l.count += s.count;
  }
  return l;
}

// Largest |a - b| / (atol + |b|) over two equally long vectors.
inline double max_rel_err(const std::vector<float>& a, const std::vector<float>& b,
                          double atol = 1e-6) {
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]) / (atol + std::abs(b[i])));
  return a.size() == b.size() ? worst : INFINITY;
}

// max |a - b| / max |b|: the error of a reordered sum relative to the tensor's scale.
inline double max_scaled_err(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

inline OptimConfig test_optim() {
  OptimConfig oc;
  oc.lr = 1e-2f;
  oc.warmup_steps = 0;
  oc.decay = "constant";
  return oc;
}

}  // namespace braid::test
