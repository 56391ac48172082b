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
  // Exact published models; the short names of the first version (llama-7b, llama-8b, llama-13b,
  // llama-70b, qwen-14b) stay as aliases of the model they meant. "qwen-72b" is now Qwen-72B
  // itself (full multi-head attention), not Qwen2.5-72B: their KV caches differ 8x.
  static const std::vector<ModelPreset> presets = {
      {"gpt2-124m", "GPT-2 small", shape("gpt2", 12, 768, 12, 0, 0, 50257, 1024)},
      {"gpt2-350m", "GPT-2 medium", shape("gpt2", 24, 1024, 16, 0, 0, 50257, 1024)},
      {"gpt2-774m", "GPT-2 large", shape("gpt2", 36, 1280, 20, 0, 0, 50257, 1024)},
      {"gpt2-1.5b", "GPT-2 XL", shape("gpt2", 48, 1600, 25, 0, 0, 50257, 1024)},
      {"llama2-7b", "Llama 2 7B", shape("llama", 32, 4096, 32, 32, 11008, 32000, 4096)},
      {"llama2-13b", "Llama 2 13B", shape("llama", 40, 5120, 40, 40, 13824, 32000, 4096)},
      {"llama2-70b", "Llama 2 70B (GQA 8)", shape("llama", 80, 8192, 64, 8, 28672, 32000, 4096)},
      {"llama3-8b", "Llama 3 8B (GQA 8)", shape("llama", 32, 4096, 32, 8, 14336, 128256, 8192)},
      {"llama3-70b", "Llama 3 70B (GQA 8)", shape("llama", 80, 8192, 64, 8, 28672, 128256, 8192)},
      {"llama3.1-405b",
       "Llama 3.1 405B (GQA 8; 8192 pre-training context, 128K after long-context training)",
       shape("llama", 126, 16384, 128, 8, 53248, 128256, 131072)},
      {"qwen-72b", "Qwen-72B (Qwen 1; full multi-head attention; qkv biases not modelled)",
       shape("llama", 80, 8192, 64, 64, 24576, 152064, 32768)},
      {"qwen2.5-14b", "Qwen2.5 14B (GQA 8; qkv biases not modelled)",
       shape("llama", 48, 5120, 40, 8, 13824, 152064, 32768)},
      {"qwen2.5-72b", "Qwen2.5 72B (GQA 8; qkv biases not modelled)",
       shape("llama", 80, 8192, 64, 8, 29568, 152064, 32768)},
      {"gpt3-175b", "GPT-3 175B shape (Brown et al. 2020)",
       shape("gpt2", 96, 12288, 96, 0, 0, 50257, 2048)},
  };
  return presets;
}

ModelConfig find_preset(const std::string& given) {
  static const std::pair<const char*, const char*> kAliases[] = {{"llama-7b", "llama2-7b"},
                                                                 {"llama-13b", "llama2-13b"},
                                                                 {"llama-70b", "llama2-70b"},
                                                                 {"llama-8b", "llama3-8b"},
                                                                 {"qwen-14b", "qwen2.5-14b"}};
  std::string name = given;
  for (const auto& [alias, real] : kAliases)
    if (name == alias) name = real;
  for (const ModelPreset& p : model_presets())
    if (p.name == name) return p.model;
  std::string names;
  for (const ModelPreset& p : model_presets()) names += (names.empty() ? "" : ", ") + p.name;
  user_error(
      "unknown model preset '{}'; expected one of: {} (aliases: llama-7b, llama-13b, llama-70b, "
      "llama-8b, "
      "qwen-14b)",
      given, names);
}

}  // namespace braid::plan
