// OptimConfig: AdamW, the learning-rate schedule and gradient clipping.
#pragma once

#include <string>
#include <vector>

#include "core/config_fields.h"

namespace braid {

struct OptimConfig {
  std::string name = "adamw";
  float lr = 3e-4f;
  float min_lr = 3e-5f;
  int warmup_steps = 100;
  std::string decay = "cosine";
  int decay_steps = 0;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
  std::vector<std::string> no_decay = {"bias", "norm", "ln_", "wpe"};
  float grad_clip = 1.0f;
  int zero = 0;

  template <class V>
  void visit(V& v) {
    v("name", name, "Optimizer: adamw (f32 moments, 8 bytes per trainable parameter) or adamw8bit (moments of every tensor of at least 4096 elements quantised to 8 bits in blocks of 2048 with the dynamic maps of bitsandbytes: about 2 bytes per parameter; the weights and the update stay f32; with zero: 1 each rank holds whole blocks of its shard).");
    v("lr", lr, "Peak learning rate, reached at the end of warmup.");
    v("min_lr", min_lr, "Learning-rate floor reached at the end of the decay.");
    v("warmup_steps", warmup_steps, "Linear warmup from 0 to lr over this many optimizer steps.");
    v("decay", decay, "Decay after warmup: cosine, linear or constant.");
    v("decay_steps", decay_steps, "Step at which the decay reaches min_lr; 0 means train.steps.");
    v("beta1", beta1, "AdamW first-moment decay.");
    v("beta2", beta2, "AdamW second-moment decay.");
    v("eps", eps, "AdamW epsilon added to the root of the second moment.");
    v("weight_decay", weight_decay, "Decoupled weight decay (AdamW), applied as p -= lr * wd * p.");
    v("no_decay", no_decay, "Parameters whose name contains any of these substrings get no weight decay; every other parameter (the weight matrices and the token embedding) decays. Also, 1-D parameters never decay.");
    v("grad_clip", grad_clip, "Clip the global gradient L2 norm to this value; 0 disables clipping.");
    v("zero", zero, "ZeRO stage: 0 keeps the whole optimizer state on every data-parallel rank; 1 shards the AdamW moments (and, with bf16/fp16, the f32 master weights) over the DP group (gradients reduce-scattered, each rank updates its shard, parameters all-gathered in the compute dtype).");
  }
  void validate() const;
};

}  // namespace braid
