// HF config.json mapping and the GPT-2 Conv1D transposes.
#include "launch/io/hf_format.h"

#include <cstring>
#include <map>
#include <set>

#include "launch/io/model_limits.h"

namespace braid {

namespace {

using json = nlohmann::json;

// The shortest decimal that reads back as `f`, so 1e-5f is written 1e-05, not 9.99999974e-06.
double clean_float(float f) { return std::stod(fmt::format("{}", f)); }

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}



float optional_float(const json& hf, const char* key, float fallback, const std::string& path) {
  if (!hf.contains(key) || hf[key].is_null()) return fallback;
  if (!hf[key].is_number()) user_error("{}: \"{}\" is {}; expected a number", path, key, hf[key].dump());
  return hf[key].get<float>();
}

bool optional_bool(const json& hf, const char* key, bool fallback, const std::string& path) {
  if (!hf.contains(key) || hf[key].is_null()) return fallback;
  if (!hf[key].is_boolean()) user_error("{}: \"{}\" is {}; expected true or false", path, key, hf[key].dump());
  return hf[key].get<bool>();
}

std::string optional_string(const json& hf, const char* key, const std::string& fallback,
                            const std::string& path) {
  if (!hf.contains(key) || hf[key].is_null()) return fallback;
  if (!hf[key].is_string()) user_error("{}: \"{}\" is {}; expected a string", path, key, hf[key].dump());
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

// braid implements plain RoPE; a config asking for any other kind is refused, never run with
// a silently different position encoding.
void check_rope_type(const json& section, const char* where, const std::string& path) {
  std::string type = "default";
  for (const char* k : {"rope_type", "type"})
    if (section.contains(k) && section[k].is_string()) type = section[k].get<std::string>();
  if (type != "default")
    user_error("{}: {} has rope_type \"{}\"; braid implements only the default RoPE (no "
               "linear, dynamic, yarn, llama3 or longrope scaling), so it cannot run this model",
               path, where, type);
}

float rope_theta_from_hf(const json& hf, const std::string& path) {
  const bool top = hf.contains("rope_theta") && !hf["rope_theta"].is_null();
  // A scaling section asks for scaled RoPE unless it says "default" outright.
  if (hf.contains("rope_scaling") && !hf["rope_scaling"].is_null()) {
    const json& rs = hf["rope_scaling"];
    if (!rs.is_object())
      user_error("{}: rope_scaling is {}; expected an object or null", path, rs.dump());
    if (!rs.contains("rope_type") && !rs.contains("type"))
      user_error("{}: rope_scaling {} names no type; braid implements only the default RoPE",
                 path, rs.dump());
    check_rope_type(rs, "rope_scaling", path);
  }
  if (hf.contains("rope_parameters") && !hf["rope_parameters"].is_null()) {
    const json& rp = hf["rope_parameters"];
    if (!rp.is_object()) user_error("{}: rope_parameters is {}; expected an object", path, rp.dump());
    check_rope_type(rp, "rope_parameters", path);
    const float theta = optional_float(rp, "rope_theta", top ? hf["rope_theta"].get<float>() : 10000.0f, path);
    if (top && optional_float(hf, "rope_theta", theta, path) != theta)
      user_error("{}: rope_theta {} differs from rope_parameters.rope_theta {}", path,
                 hf["rope_theta"].dump(), rp["rope_theta"].dump());
    return theta;
  }
  return optional_float(hf, "rope_theta", 10000.0f, path);
}

// (rows, cols) -> (cols, rows), element by element in tiles that stay in cache.
template <typename T>
void transpose_2d(const T* src, T* dst, int64_t rows, int64_t cols) {
  constexpr int64_t kTile = 32;
  for (int64_t r0 = 0; r0 < rows; r0 += kTile)
    for (int64_t c0 = 0; c0 < cols; c0 += kTile)
      for (int64_t r = r0; r < std::min(rows, r0 + kTile); ++r)
        for (int64_t c = c0; c < std::min(cols, c0 + kTile); ++c) dst[c * rows + r] = src[r * cols + c];
}

Tensor transposed(const Tensor& t) {
  BRAID_CHECK(t.ndim() == 2, "transpose of {}", t.str());
  const int64_t rows = t.dim(0), cols = t.dim(1);
  Tensor out = t.new_empty({cols, rows}, t.dtype(), MemCategory::Weights);
  switch (dtype_size(t.dtype())) {
    case 2: transpose_2d(t.data<uint16_t>(), out.data<uint16_t>(), rows, cols); break;
    case 4: transpose_2d(t.data<uint32_t>(), out.data<uint32_t>(), rows, cols); break;
    default: BRAID_CHECK(false, "no transpose for dtype {}", dtype_name(t.dtype()));
  }
  return out;
}

Shape reversed(const Shape& s) { return Shape(s.rbegin(), s.rend()); }

bool is_hf_buffer(const ModelConfig& cfg, const std::string& name) {
  if (cfg.is_llama()) return ends_with(name, ".rotary_emb.inv_freq");
  return ends_with(name, ".attn.bias") || ends_with(name, ".attn.masked_bias");
}

}  // namespace

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
            {"layer_norm_epsilon", clean_float(cfg.norm_eps)},
            {"activation_function", "gelu_new"},
            {"initializer_range", clean_float(cfg.init_std)},
            {"tie_word_embeddings", cfg.tied()},
            {"torch_dtype", "float32"}};
  }
  return {{"model_type", "llama"},
          {"architectures", {"LlamaForCausalLM"}},
          {"vocab_size", cfg.vocab_size},
          {"hidden_size", cfg.n_embd},
          {"intermediate_size", cfg.ffn()},
          {"num_hidden_layers", cfg.n_layer},
          {"num_attention_heads", cfg.n_head},
          {"num_key_value_heads", cfg.kv_heads()},
          {"head_dim", cfg.head_dim()},
          {"max_position_embeddings", cfg.context_length},
          {"rms_norm_eps", clean_float(cfg.norm_eps)},
          {"rope_theta", clean_float(cfg.rope_theta)},
          {"rope_scaling", nullptr},
          {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", clean_float(cfg.rope_theta)}}},
          {"attention_bias", false},
          {"mlp_bias", false},
          {"initializer_range", clean_float(cfg.init_std)},
          {"tie_word_embeddings", cfg.tied()},
          {"hidden_act", "silu"},
          {"torch_dtype", "float32"}};
}

ModelConfig model_config_from_hf(const json& hf, const std::string& path) {
  if (!hf.is_object()) user_error("{}: expected a JSON object, found {}", path, hf.type_name());
  if (!hf.contains("model_type") || !hf["model_type"].is_string())
    user_error("{}: missing \"model_type\" (expected \"gpt2\" or \"llama\")", path);
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
      user_error("{}: activation_function \"{}\" is not supported; braid's gpt2 uses the tanh "
                 "GELU (gelu_new or gelu_pytorch_tanh)", path, act);
    if (optional_bool(hf, "scale_attn_by_inverse_layer_idx", false, path))
      user_error("{}: scale_attn_by_inverse_layer_idx true is not supported", path);
    if (!optional_bool(hf, "scale_attn_weights", true, path))
      user_error("{}: scale_attn_weights false is not supported", path);
    if (!optional_bool(hf, "tie_word_embeddings", true, path)) c.tie_embeddings = false;
  } else if (type == "llama") {
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
    c.rope_theta = rope_theta_from_hf(hf, path);
    const std::string act = optional_string(hf, "hidden_act", "silu", path);
    if (act != "silu") user_error("{}: hidden_act \"{}\" is not supported; expected silu", path, act);
    if (optional_bool(hf, "attention_bias", false, path))
      user_error("{}: attention_bias true is not supported; braid's llama has no biases", path);
    if (optional_bool(hf, "mlp_bias", false, path))
      user_error("{}: mlp_bias true is not supported; braid's llama has no biases", path);
    if (hf.contains("head_dim") && !hf["head_dim"].is_null() && c.n_head > 0 &&
        int64_t{require_int(hf, "head_dim", path)} * c.n_head != c.n_embd)
      user_error("{}: head_dim {} is not hidden_size / num_attention_heads ({}); braid's attention "
                 "has head_dim = hidden_size / num_attention_heads, so this model is not supported",
                 path, hf["head_dim"].dump(), c.n_embd / c.n_head);
    if (optional_bool(hf, "tie_word_embeddings", false, path)) c.tie_embeddings = true;
    ModelConfig defaults = c;
    defaults.ffn_hidden = 0;
    c.ffn_hidden = defaults.ffn() == inter ? 0 : inter;
  } else {
    user_error("{}: model_type \"{}\" is not supported; braid converts gpt2 and llama", path, type);
  }
  if (hf.contains("initializer_range")) c.init_std = optional_float(hf, "initializer_range", c.init_std, path);
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
      p.push_back({l + "self_attn.k_proj.weight", {KV, C}});
      p.push_back({l + "self_attn.v_proj.weight", {KV, C}});
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
  return ends_with(name, ".attn.c_attn.weight") || ends_with(name, ".attn.c_proj.weight") ||
         ends_with(name, ".mlp.c_fc.weight") || ends_with(name, ".mlp.c_proj.weight");
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
  for (const auto& [name, s] : expected) BRAID_CHECK(seen.count(name), "parameter {} missing", name);
  return out;
}

NamedTensors from_hf_tensors(const ModelConfig& cfg, const NamedTensors& hf,
                             const std::string& path) {
  const auto shapes = parameter_shapes(cfg);
  std::map<std::string, Shape> expected(shapes.begin(), shapes.end());
  const std::string base = cfg.is_llama() ? "model." : "transformer.";
  std::map<std::string, Tensor> found;
  Tensor tied_head;  // an lm_head.weight in a file whose config ties it
  for (const auto& [file_name, t] : hf) {
    if (is_hf_buffer(cfg, file_name)) continue;
    std::string name = file_name;
    if (!expected.count(name) && expected.count(base + name)) name = base + name;
    if (name == "lm_head.weight" && cfg.tied()) {
      tied_head = t;
      continue;
    }
    auto it = expected.find(name);
    if (it == expected.end())
      user_error("{}: tensor '{}' is not a parameter of the {} model its config describes",
                 path, file_name, cfg.family);
    const bool tr = hf_transposed(cfg, name);
    const Shape want = tr ? reversed(it->second) : it->second;
    if (t.shape() != want)
      user_error("{}: {} has shape {} but the config describes {}", path, file_name,
                 shape_str(t.shape()), shape_str(want));
    if (!found.emplace(name, tr ? transposed(t) : t).second)
      user_error("{}: tensor {} appears twice (with and without the '{}' prefix)", path, name, base);
  }
  NamedTensors out;
  for (const auto& [name, s] : shapes) {
    auto it = found.find(name);
    if (it == found.end())
      user_error("{}: missing tensor {} (shape {}) that a {} model with this config needs", path,
                 name, shape_str(s), cfg.family);
    out.emplace_back(name, it->second);
  }
  if (tied_head.defined()) {
    const Tensor& emb = found.at(shapes.front().first);
    if (tied_head.shape() != emb.shape() || tied_head.dtype() != emb.dtype() ||
        std::memcmp(tied_head.raw(), emb.raw(), emb.nbytes()) != 0)
      user_error("{}: lm_head.weight differs from {} but the config ties them "
                 "(tie_word_embeddings); set tie_word_embeddings false to import an untied head",
                 path, shapes.front().first);
  }
  return out;
}

}  // namespace braid
