// LoraConfig: the `lora` section (low-rank adapters on a frozen base model).
#pragma once

#include <string>
#include <vector>

#include "core/config_fields.h"

namespace braid {

struct LoraConfig {
  int rank = 0;
  float alpha = 16.0f;
  float dropout = 0.0f;
  std::vector<std::string> targets = {"q", "v"};
  bool rslora = false;
  std::string init_from = "";

  bool enabled() const { return rank > 0; }

  template <class V>
  void visit(V& v) {
    v("rank", rank, "Adapter rank r; 0 disables LoRA (the whole model trains).");
    v("alpha", alpha,
      "Scale numerator: the adapter adds (alpha / r) * B A x, or (alpha / sqrt(r)) * B A x with "
      "rslora.");
    v("dropout", dropout,
      "Dropout on the adapter's input during training (0 <= p < 1); masks are counter-based, so "
      "resumed and recomputed steps draw the same ones.");
    v("targets", targets,
      "Linears that get adapters, by module name: q, k, v, o, up, down, gate (llama), c_attn, "
      "c_proj, c_fc (gpt2; c_proj means both attn.c_proj and mlp.c_proj), or all-linear.");
    v("rslora", rslora, "Rank-stabilised scaling alpha / sqrt(r) instead of alpha / r.");
    v("init_from", init_from,
      "Base model to start from: an HF directory (config.json + model.safetensors), a braid "
      "checkpoint or a run directory. Its shape replaces the model section. Empty: the model "
      "section's seeded init.");
  }
  void validate() const {
    if (rank < 0) config_error("rank", "rank is {}; expected >= 0 (0: LoRA off)", rank);
    if (!(alpha > 0.0f)) config_error("alpha", "alpha is {}; expected > 0", alpha);
    if (!(dropout >= 0.0f && dropout < 1.0f))
      config_error("dropout", "dropout is {}; expected 0 <= dropout < 1", dropout);
    static const char* known[] = {"q",    "k",      "v",      "o",    "up",        "down",
                                  "gate", "c_attn", "c_proj", "c_fc", "all-linear"};
    if (rank > 0 && targets.empty())
      config_error("targets",
                   "targets is empty; name at least one module (e.g. [q, v] or [all-linear])");
    for (const std::string& t : targets) {
      bool ok = false;
      for (const char* k : known) ok = ok || t == k;
      if (!ok)
        config_error("targets",
                     "target '{}' is not a module name; expected q, k, v, o, up, down, gate, "
                     "c_attn, c_proj, c_fc or all-linear",
                     t);
    }
  }
};

}  // namespace braid
