// Preset shapes from the models' published configs (see docs/plan.md for sources).
#include "launch/plan/presets.h"

#include "core/error.h"

namespace braid::plan {

namespace {

ModelConfig shape(const char* family, int layers, int hidden, int heads, int kv_heads, int ffn,
                  int vocab, int seq) {
  ModelConfig m;
  m.family = family;
  m.n_layer = layers;
  m.n_embd = hidden;
  m.n_head = heads;
  m.n_kv_head = kv_heads;
  m.ffn_hidden = ffn;
  m.vocab_size = vocab;
  m.context_length = seq;
  return m;
}

}  // namespace

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> presets = {
      {"gpt2-124m", "GPT-2 small", shape("gpt2", 12, 768, 12, 0, 0, 50257, 1024)},
      {"gpt2-350m", "GPT-2 medium", shape("gpt2", 24, 1024, 16, 0, 0, 50257, 1024)},
      {"gpt2-774m", "GPT-2 large", shape("gpt2", 36, 1280, 20, 0, 0, 50257, 1024)},
      {"gpt2-1.5b", "GPT-2 XL", shape("gpt2", 48, 1600, 25, 0, 0, 50257, 1024)},
      {"llama-7b", "Llama 2 7B", shape("llama", 32, 4096, 32, 32, 11008, 32000, 4096)},
      {"llama-8b", "Llama 3 8B (GQA 8)", shape("llama", 32, 4096, 32, 8, 14336, 128256, 8192)},
      {"llama-13b", "Llama 2 13B", shape("llama", 40, 5120, 40, 40, 13824, 32000, 4096)},
      {"llama-70b", "Llama 2 70B (GQA 8)", shape("llama", 80, 8192, 64, 8, 28672, 32000, 4096)},
      {"qwen-14b", "Qwen2.5 14B (GQA 8; qkv biases not modelled)",
       shape("llama", 48, 5120, 40, 8, 13824, 152064, 4096)},
      {"qwen-72b", "Qwen2.5 72B (GQA 8; qkv biases not modelled)",
       shape("llama", 80, 8192, 64, 8, 29568, 152064, 4096)},
      {"gpt3-175b", "GPT-3 175B shape (Brown et al. 2020)",
       shape("gpt2", 96, 12288, 96, 0, 0, 50257, 2048)},
  };
  return presets;
}

ModelConfig find_preset(const std::string& name) {
  for (const ModelPreset& p : model_presets())
    if (p.name == name) return p.model;
  std::string names;
  for (const ModelPreset& p : model_presets()) names += (names.empty() ? "" : ", ") + p.name;
  user_error("unknown model preset '{}'; expected one of: {}", name, names);
}

}  // namespace braid::plan
