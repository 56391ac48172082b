// HF config.json mapping and the GPT-2 Conv1D transposes.
#include "launch/io/hf_format.h"

#include <cstring>
#include <map>
#include <set>

#include "launch/io/hf_rope.h"
#include "launch/io/model_limits.h"

namespace braid {

namespace {

using json = nlohmann::json;

float optional_float(const json& hf, const char* key, float fallback, const std::string& path) {
  if (!hf.contains(key) || hf[key].is_null()) return fallback;
  if (!hf[key].is_number())
    user_error("{}: \"{}\" is {}; expected a number", path, key, hf[key].dump());
  return hf[key].get<float>();
}

bool optional_bool(const json& hf, const char* key, bool fallback, const std::string& path) {
  if (!hf.contains(key) || hf[key].is_null()) return fallback;
  if (!hf[key].is_boolean())
    user_error("{}: \"{}\" is {}; expected true or false", path, key, hf[key].dump());
  return hf[key].get<bool>();
}

std::string optional_string(const json& hf, const char* key, const std::string& fallback,
                            const std::string& path) {
  if (!hf.contains(key) || hf[key].is_null()) return fallback;
  if (!hf[key].is_string())
    user_error("{}: \"{}\" is {}; expected a string", path, key, hf[key].dump());
  return hf[key].get<std::string>();
}

// Sizes are bounded (launch/io/model_limits.h) so that every product braid forms from them stays
// far inside int64 and 8 x a width inside int.
int require_int(const json& hf, const char* key, const std::string& path,
                int64_t max = kMaxModelDim) {
  if (!hf.contains(key)) user_error("{}: missing key \"{}\"", path, key);
  const json& v = hf[key];
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(max)) ||
      v.get<int64_t>() < 0 || v.get<int64_t>() > max)
    user_error("{}: \"{}\" is {}; expected an integer in 0..{}", path, key, v.dump(), max);
  return static_cast<int>(v.get<int64_t>());
}

// The sliding window a mistral or qwen2 config asks for (0: none). Qwen2 slides only the
// layers from max_window_layers on; braid's window is the same in every layer, so a config
// that mixes both kinds is refused.
int sliding_window_from_hf(const json& hf, const std::string& type, int n_layer,
                           const std::string& path) {
  auto window = [&]() -> int {
    if (!hf.contains("sliding_window")) return type == "mistral" ? 4096 : 0;  // HF defaults
    if (hf["sliding_window"].is_null()) return 0;
    return require_int(hf, "sliding_window", path);
  };
  int w = 0;
  if (type == "mistral") {
    w = window();
  } else if (type == "qwen2" && optional_bool(hf, "use_sliding_window", false, path)) {
    const int from =
        hf.contains("max_window_layers") ? require_int(hf, "max_window_layers", path) : 28;
    if (from > 0 && from < n_layer)
      user_error(
          "{}: use_sliding_window with max_window_layers {} slides only layers {}..{}; "
          "braid's window is the same in every layer (max_window_layers 0 or >= {} only)",
          path, from, from, n_layer - 1, n_layer);
    w = from == 0 ? window() : 0;
  } else if (type == "llama" && hf.contains("sliding_window") && !hf["sliding_window"].is_null()) {
    user_error(
        "{}: sliding_window {} in a llama config; LlamaForCausalLM has no sliding window "
        "(model_type mistral has)",
        path, hf["sliding_window"].dump());
  }
  if (hf.contains("layer_types") && !hf["layer_types"].is_null()) {
    const json& lt = hf["layer_types"];
    if (!lt.is_array()) user_error("{}: layer_types is {}; expected a list", path, lt.dump());
    for (const json& t : lt) {
      const bool full = t == "full_attention", sliding = t == "sliding_attention";
      if (!(full && w == 0) && !(sliding && w > 0))
        user_error(
            "{}: layer_types has {} but the config's window is {}; braid runs every layer "
            "with the same attention ({})",
            path, t.dump(), w, w > 0 ? "all sliding_attention" : "all full_attention");
    }
  }
  return w;
}

// Llama and the variants that differ from it by a key: mistral (sliding_window), qwen2 (q/k/v
// biases, optional sliding window). TinyLlama and SmolLM are plain llama configs.
void llama_family_from_hf(const json& hf, const std::string& type, const std::string& path,
                          ModelConfig& c) {
  c.family = "llama";
  c.vocab_size = require_int(hf, "vocab_size", path);
  c.n_embd = require_int(hf, "hidden_size", path);
  const int inter = require_int(hf, "intermediate_size", path);
  c.n_layer = require_int(hf, "num_hidden_layers", path, kMaxLayers);
  c.n_head = require_int(hf, "num_attention_heads", path);
  c.context_length = require_int(hf, "max_position_embeddings", path);
  const int kv = hf.contains("num_key_value_heads") && !hf["num_key_value_heads"].is_null()
                     ? require_int(hf, "num_key_value_heads", path)
                     : c.n_head;
  c.n_kv_head = kv == c.n_head ? 0 : kv;
  c.norm_eps = optional_float(hf, "rms_norm_eps", 1e-6f, path);
  rope_from_hf(hf, c, path);
  const std::string act = optional_string(hf, "hidden_act", "silu", path);
  if (act != "silu") user_error("{}: hidden_act \"{}\" is not supported; expected silu", path, act);
  if (optional_bool(hf, "attention_bias", false, path))
    user_error(
        "{}: attention_bias true is not supported (biases on q, k, v and o); braid has "
        "q/k/v biases only, as model_type qwen2",
        path);
  if (optional_bool(hf, "mlp_bias", false, path))
    user_error("{}: mlp_bias true is not supported; braid's llama MLP has no biases", path);
  if (optional_float(hf, "attention_dropout", 0.0f, path) != 0.0f)
    user_error("{}: attention_dropout {} is not supported; braid has no attention dropout (0 only)",
               path, hf["attention_dropout"].dump());
  if (hf.contains("head_dim") && !hf["head_dim"].is_null() && c.n_head > 0 &&
      int64_t{require_int(hf, "head_dim", path)} * c.n_head != c.n_embd)
    user_error(
        "{}: head_dim {} is not hidden_size / num_attention_heads ({}); braid's attention "
        "has head_dim = hidden_size / num_attention_heads, so this model is not supported",
        path, hf["head_dim"].dump(), c.n_embd / c.n_head);
  c.qkv_bias = type == "qwen2";
  c.sliding_window = sliding_window_from_hf(hf, type, c.n_layer, path);
  if (optional_bool(hf, "tie_word_embeddings", false, path)) c.tie_embeddings = true;
  ModelConfig defaults = c;
  defaults.ffn_hidden = 0;
  c.ffn_hidden = defaults.ffn() == inter ? 0 : inter;
}

// (rows, cols) -> (cols, rows), element by element in tiles that stay in cache.
template <typename T>
void transpose_2d(const T* src, T* dst, int64_t rows, int64_t cols) {
  constexpr int64_t kTile = 32;
  for (int64_t r0 = 0; r0 < rows; r0 += kTile)
    for (int64_t c0 = 0; c0 < cols; c0 += kTile)
      for (int64_t r = r0; r < std::min(rows, r0 + kTile); ++r)
        for (int64_t c = c0; c < std::min(cols, c0 + kTile); ++c)
          dst[c * rows + r] = src[r * cols + c];
}

Tensor transposed(const Tensor& t) {
  BRAID_CHECK(t.ndim() == 2, "transpose of {}", t.str());
  const int64_t rows = t.dim(0), cols = t.dim(1);
  Tensor out = t.new_empty({cols, rows}, t.dtype(), MemCategory::Weights);
  switch (dtype_size(t.dtype())) {
    case 2:
      transpose_2d(t.data<uint16_t>(), out.data<uint16_t>(), rows, cols);
      break;
    case 4:
      transpose_2d(t.data<uint32_t>(), out.data<uint32_t>(), rows, cols);
      break;
    default:
      BRAID_CHECK(false, "no transpose for dtype {}", dtype_name(t.dtype()));
  }
  return out;
}

Shape reversed(const Shape& s) { return Shape(s.rbegin(), s.rend()); }

bool is_hf_buffer(const ModelConfig& cfg, const std::string& name) {
  if (cfg.is_llama()) return name.ends_with(".rotary_emb.inv_freq");
  return name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias");
}

}  // namespace

double json_float(float f) { return std::stod(fmt::format("{}", f)); }

json hf_config_json(const ModelConfig& cfg) {
  if (!cfg.is_llama()) {
    return {{"model_type", "gpt2"},
            {"architectures", {"GPT2LMHeadModel"}},
            {"vocab_size", cfg.vocab_size},
            {"n_positions", cfg.context_length},
            {"n_ctx", cfg.context_length},
            {"n_embd", cfg.n_embd},
            {"n_layer", cfg.n_layer},
            {"n_head", cfg.n_head},
            {"n_inner", cfg.ffn() == 4 * cfg.n_embd ? json(nullptr) : json(cfg.ffn())},
            {"layer_norm_epsilon", json_float(cfg.norm_eps)},
            {"activation_function", "gelu_new"},
            {"initializer_range", json_float(cfg.init_std)},
            {"tie_word_embeddings", cfg.tied()},
            {"torch_dtype", "float32"}};
  }
  // The HF architecture that computes what this config does: Qwen2 has q/k/v biases, Mistral
  // a sliding window, Llama neither.
  std::string type = "llama", arch = "LlamaForCausalLM";
  if (cfg.qkv_bias) {
    type = "qwen2";
    arch = "Qwen2ForCausalLM";
  } else if (cfg.sliding_window > 0) {
    type = "mistral";
    arch = "MistralForCausalLM";
  }
  json j = {{"model_type", type},
            {"architectures", {arch}},
            {"vocab_size", cfg.vocab_size},
            {"hidden_size", cfg.n_embd},
            {"intermediate_size", cfg.ffn()},
            {"num_hidden_layers", cfg.n_layer},
            {"num_attention_heads", cfg.n_head},
            {"num_key_value_heads", cfg.kv_heads()},
            {"head_dim", cfg.head_dim()},
            {"max_position_embeddings", cfg.context_length},
            {"rms_norm_eps", json_float(cfg.norm_eps)},
            {"initializer_range", json_float(cfg.init_std)},
            {"tie_word_embeddings", cfg.tied()},
            {"hidden_act", "silu"},
            {"attention_dropout", 0.0},
            {"torch_dtype", "float32"}};
  rope_to_hf(cfg, j);
  if (type == "llama") {
    j["attention_bias"] = false;
    j["mlp_bias"] = false;
  } else if (type == "mistral") {
    j["sliding_window"] = cfg.sliding_window;
  } else {
    // Qwen2 slides layers from max_window_layers on: 0 makes every layer slide.
    j["use_sliding_window"] = cfg.sliding_window > 0;
    j["sliding_window"] = cfg.sliding_window > 0 ? json(cfg.sliding_window) : json(nullptr);
    j["max_window_layers"] = cfg.sliding_window > 0 ? 0 : cfg.n_layer;
  }
  return j;
}

ModelConfig model_config_from_hf(const json& hf, const std::string& path) {
  if (!hf.is_object()) user_error("{}: expected a JSON object, found {}", path, hf.type_name());
  if (!hf.contains("model_type") || !hf["model_type"].is_string())
    user_error("{}: missing \"model_type\" (expected gpt2, llama, mistral or qwen2)", path);
  const std::string type = hf["model_type"].get<std::string>();
  ModelConfig c;
  if (type == "gpt2") {
    c.family = "gpt2";
    c.vocab_size = require_int(hf, "vocab_size", path);
    c.context_length = require_int(hf, hf.contains("n_positions") ? "n_positions" : "n_ctx", path);
    c.n_embd = require_int(hf, "n_embd", path);
    c.n_layer = require_int(hf, "n_layer", path, kMaxLayers);
    c.n_head = require_int(hf, "n_head", path);
    if (hf.contains("n_inner") && !hf["n_inner"].is_null()) {
      const int inner = require_int(hf, "n_inner", path);
      c.ffn_hidden = inner == 4 * int64_t{c.n_embd} ? 0 : inner;
    }
    c.norm_eps = optional_float(hf, "layer_norm_epsilon", 1e-5f, path);
    const std::string act = optional_string(hf, "activation_function", "gelu_new", path);
    if (act != "gelu_new" && act != "gelu_pytorch_tanh")
      user_error(
          "{}: activation_function \"{}\" is not supported; braid's gpt2 uses the tanh "
          "GELU (gelu_new or gelu_pytorch_tanh)",
          path, act);
    if (optional_bool(hf, "scale_attn_by_inverse_layer_idx", false, path))
      user_error("{}: scale_attn_by_inverse_layer_idx true is not supported", path);
    if (!optional_bool(hf, "scale_attn_weights", true, path))
      user_error("{}: scale_attn_weights false is not supported", path);
    if (!optional_bool(hf, "tie_word_embeddings", true, path)) c.tie_embeddings = false;
  } else if (type == "llama" || type == "mistral" || type == "qwen2") {
    llama_family_from_hf(hf, type, path, c);
  } else {
    user_error(
        "{}: model_type \"{}\" is not supported; braid converts gpt2, llama (Llama 2 and "
        "3, TinyLlama, SmolLM), mistral and qwen2",
        path, type);
  }
  if (hf.contains("initializer_range"))
    c.init_std = optional_float(hf, "initializer_range", c.init_std, path);
  try {
    c.validate();
  } catch (const ConfigError& e) {
    user_error("{}: the model it describes is invalid: {}", path, e.what());
  }
  return c;
}

std::vector<std::pair<std::string, Shape>> parameter_shapes(const ModelConfig& cfg) {
  const int64_t V = cfg.vocab_size, C = cfg.n_embd, F = cfg.ffn();
  std::vector<std::pair<std::string, Shape>> p;
  if (!cfg.is_llama()) {
    p.push_back({"transformer.wte.weight", {V, C}});
    p.push_back({"transformer.wpe.weight", {cfg.context_length, C}});
    for (int i = 0; i < cfg.n_layer; ++i) {
      const std::string h = fmt::format("transformer.h.{}.", i);
      p.push_back({h + "ln_1.weight", {C}});
      p.push_back({h + "ln_1.bias", {C}});
      p.push_back({h + "attn.c_attn.weight", {3 * C, C}});
      p.push_back({h + "attn.c_attn.bias", {3 * C}});
      p.push_back({h + "attn.c_proj.weight", {C, C}});
      p.push_back({h + "attn.c_proj.bias", {C}});
      p.push_back({h + "ln_2.weight", {C}});
      p.push_back({h + "ln_2.bias", {C}});
      p.push_back({h + "mlp.c_fc.weight", {F, C}});
      p.push_back({h + "mlp.c_fc.bias", {F}});
      p.push_back({h + "mlp.c_proj.weight", {C, F}});
      p.push_back({h + "mlp.c_proj.bias", {C}});
    }
    p.push_back({"transformer.ln_f.weight", {C}});
    p.push_back({"transformer.ln_f.bias", {C}});
  } else {
    const int64_t KV = static_cast<int64_t>(cfg.kv_heads()) * cfg.head_dim();
    p.push_back({"model.embed_tokens.weight", {V, C}});
    for (int i = 0; i < cfg.n_layer; ++i) {
      const std::string l = fmt::format("model.layers.{}.", i);
      p.push_back({l + "input_layernorm.weight", {C}});
      p.push_back({l + "self_attn.q_proj.weight", {C, C}});
      if (cfg.qkv_bias) p.push_back({l + "self_attn.q_proj.bias", {C}});
      p.push_back({l + "self_attn.k_proj.weight", {KV, C}});
      if (cfg.qkv_bias) p.push_back({l + "self_attn.k_proj.bias", {KV}});
      p.push_back({l + "self_attn.v_proj.weight", {KV, C}});
      if (cfg.qkv_bias) p.push_back({l + "self_attn.v_proj.bias", {KV}});
      p.push_back({l + "self_attn.o_proj.weight", {C, C}});
      p.push_back({l + "post_attention_layernorm.weight", {C}});
      p.push_back({l + "mlp.gate_proj.weight", {F, C}});
      p.push_back({l + "mlp.up_proj.weight", {F, C}});
      p.push_back({l + "mlp.down_proj.weight", {C, F}});
    }
    p.push_back({"model.norm.weight", {C}});
  }
  if (!cfg.tied()) p.push_back({"lm_head.weight", {V, C}});
  return p;
}

bool hf_transposed(const ModelConfig& cfg, const std::string& name) {
  if (cfg.is_llama() || name.rfind("transformer.h.", 0) != 0) return false;
  return name.ends_with(".attn.c_attn.weight") || name.ends_with(".attn.c_proj.weight") ||
         name.ends_with(".mlp.c_fc.weight") || name.ends_with(".mlp.c_proj.weight");
}

NamedTensors to_hf_tensors(const ModelConfig& cfg, const NamedTensors& params) {
  std::map<std::string, Shape> expected;
  for (auto& [n, s] : parameter_shapes(cfg)) expected.emplace(n, s);
  NamedTensors out;
  std::set<std::string> seen;
  for (const auto& [name, t] : params) {
    if (name == "lm_head.weight" && cfg.tied()) continue;  // HF re-ties it from the embedding
    auto it = expected.find(name);
    BRAID_CHECK(it != expected.end(), "parameter {} is not part of a {} model", name, cfg.family);
    BRAID_CHECK(t.shape() == it->second, "parameter {} has shape {}, expected {}", name,
                shape_str(t.shape()), shape_str(it->second));
    BRAID_CHECK(seen.insert(name).second, "parameter {} given twice", name);
    out.emplace_back(name, hf_transposed(cfg, name) ? transposed(t) : t);
  }
  for (const auto& [name, s] : expected)
    BRAID_CHECK(seen.count(name), "parameter {} missing", name);
  return out;
}

std::vector<HfTensorOut> hf_tensors_out(const ModelConfig& cfg, const NamedTensors& params,
                                        DType dtype) {
  std::map<std::string, Shape> expected;
  for (auto& [n, s] : parameter_shapes(cfg)) expected.emplace(n, s);
  std::vector<HfTensorOut> out;
  std::set<std::string> seen;
  for (const auto& [name, t] : params) {
    if (name == "lm_head.weight" && cfg.tied()) continue;  // HF re-ties it from the embedding
    auto it = expected.find(name);
    BRAID_CHECK(it != expected.end(), "parameter {} is not part of a {} model", name, cfg.family);
    BRAID_CHECK(t.shape() == it->second, "parameter {} has shape {}, expected {}", name,
                shape_str(t.shape()), shape_str(it->second));
    BRAID_CHECK(seen.insert(name).second, "parameter {} given twice", name);
    const bool tr = hf_transposed(cfg, name);
    Tensor value = t;
    out.push_back({name, tr ? reversed(t.shape()) : t.shape(), dtype, [value, tr, dtype] {
                     Tensor x = tr ? transposed(value) : value;
                     return x.dtype() == dtype ? x : x.to(dtype);
                   }});
  }
  for (const auto& [name, s] : expected)
    BRAID_CHECK(seen.count(name), "parameter {} missing", name);
  return out;
}

HfImportPlan plan_hf_import(const ModelConfig& cfg,
                            const std::vector<std::pair<std::string, Shape>>& file_tensors,
                            const std::string& path) {
  const auto shapes = parameter_shapes(cfg);
  std::map<std::string, Shape> expected(shapes.begin(), shapes.end());
  const std::string base = cfg.is_llama() ? "model." : "transformer.";
  std::map<std::string, HfTensorSource> found;
  HfImportPlan plan;
  for (const auto& [file_name, shape] : file_tensors) {
    if (is_hf_buffer(cfg, file_name)) continue;
    std::string name = file_name;
    if (!expected.count(name) && expected.count(base + name)) name = base + name;
    if (name == "lm_head.weight" && cfg.tied()) {
      plan.tied_head = file_name;
      continue;
    }
    auto it = expected.find(name);
    if (it == expected.end())
      user_error("{}: tensor '{}' is not a parameter of the {} model its config describes", path,
                 file_name, cfg.family);
    const bool tr = hf_transposed(cfg, name);
    const Shape want = tr ? reversed(it->second) : it->second;
    if (shape != want)
      user_error("{}: {} has shape {} but the config describes {}", path, file_name,
                 shape_str(shape), shape_str(want));
    if (!found.emplace(name, HfTensorSource{name, file_name, tr}).second)
      user_error("{}: tensor {} appears twice (with and without the '{}' prefix)", path, name,
                 base);
  }
  for (const auto& [name, s] : shapes) {
    auto it = found.find(name);
    if (it == found.end())
      user_error("{}: missing tensor {} (shape {}) that a {} model with this config needs", path,
                 name, shape_str(s), cfg.family);
    plan.params.push_back(it->second);
  }
  return plan;
}

Tensor hf_tensor_to_braid(const HfTensorSource& src, const Tensor& t) {
  return src.transposed ? transposed(t) : t;
}

NamedTensors from_hf_tensors(const ModelConfig& cfg, const NamedTensors& hf,
                             const std::string& path) {
  std::vector<std::pair<std::string, Shape>> headers;
  std::map<std::string, Tensor> by_name;
  for (const auto& [n, t] : hf) {
    headers.emplace_back(n, t.shape());
    by_name.emplace(n, t);
  }
  const HfImportPlan plan = plan_hf_import(cfg, headers, path);
  NamedTensors out;
  for (const HfTensorSource& src : plan.params)
    out.emplace_back(src.param, hf_tensor_to_braid(src, by_name.at(src.file_name)));
  if (!plan.tied_head.empty()) {
    const Tensor& head = by_name.at(plan.tied_head);
    const Tensor& emb = out.front().second;
    if (head.shape() != emb.shape() || head.dtype() != emb.dtype() ||
        std::memcmp(head.raw(), emb.raw(), emb.nbytes()) != 0)
      user_error(
          "{}: lm_head.weight differs from {} but the config ties them "
          "(tie_word_embeddings); set tie_word_embeddings false to import an untied head",
          path, out.front().first);
  }
  return out;
}

}  // namespace braid
