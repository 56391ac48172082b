// HF rope_parameters / rope_scaling <-> ModelConfig's rope_* keys.
#include "launch/io/hf_rope.h"

#include <optional>
#include <vector>

#include "launch/io/hf_format.h"

namespace braid {

namespace {

using json = nlohmann::json;

// The fields each rope type takes besides rope_type (or type), rope_theta and
// partial_rotary_factor; the same names as transformers' validation.
std::vector<std::string> fields_of(RopeType t) {
  switch (t) {
    case RopeType::Default:
      return {};
    case RopeType::Linear:
      return {"factor"};
    case RopeType::Llama3:
      return {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"};
    case RopeType::Yarn:
      return {"factor",           "original_max_position_embeddings",
              "attention_factor", "beta_fast",
              "beta_slow",        "mscale",
              "mscale_all_dim",   "truncate"};
  }
  return {};
}

std::string joined(const std::vector<std::string>& v) {
  if (v.empty()) return "nothing else";
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}

// One section (rope_parameters or rope_scaling) being read.
struct Section {
  const json& j;
  std::string where;  // "rope_parameters"
  const std::string& path;

  bool has(const char* key) const { return j.contains(key) && !j[key].is_null(); }
  std::optional<double> number(const char* key) const {
    if (!has(key)) return std::nullopt;
    if (!j[key].is_number())
      user_error("{}: {}.{} is {}; expected a number", path, where, key, j[key].dump());
    return j[key].get<double>();
  }
  double required_number(const char* key, const std::string& type) const {
    if (!has(key)) user_error("{}: {} has rope_type \"{}\" but no \"{}\"", path, where, type, key);
    return *number(key);
  }
  std::optional<int64_t> integer(const char* key) const {
    if (!has(key)) return std::nullopt;
    if (!j[key].is_number_integer() || j[key].get<int64_t>() < 1 ||
        j[key].get<int64_t>() > (int64_t{1} << 30))
      user_error("{}: {}.{} is {}; expected a positive integer", path, where, key, j[key].dump());
    return j[key].get<int64_t>();
  }
};

std::string type_of(const Section& s) {
  std::optional<std::string> type;
  for (const char* k : {"rope_type", "type"}) {
    if (!s.has(k)) continue;
    if (!s.j[k].is_string())
      user_error("{}: {}.{} is {}; expected a string", s.path, s.where, k, s.j[k].dump());
    const std::string t = s.j[k].get<std::string>();
    if (type && *type != t)
      user_error("{}: {} has rope_type \"{}\" and type \"{}\"; give one", s.path, s.where, *type,
                 t);
    type = t;
  }
  if (!type && s.where == "rope_scaling")
    user_error("{}: rope_scaling {} names no rope_type", s.path, s.j.dump());
  return type.value_or("default");
}

void check_partial_rotary(const json& j, const std::string& where, const std::string& path) {
  if (!j.contains("partial_rotary_factor") || j["partial_rotary_factor"].is_null()) return;
  const json& v = j["partial_rotary_factor"];
  if (!v.is_number() || v.get<double>() != 1.0)
    user_error("{}: {}partial_rotary_factor is {}; braid rotates the whole head (1.0 only)", path,
               where, v.dump());
}

// The rope_* fields one section describes, on top of `c` (whose rope_* are the defaults).
ModelConfig read_section(const Section& s, ModelConfig c, const json& hf) {
  if (!s.j.is_object())
    user_error("{}: {} is {}; expected an object or null", s.path, s.where, s.j.dump());
  const std::string type_name = type_of(s);
  const std::optional<RopeType> type = enum_from_name<RopeType>(type_name);
  if (!type)
    user_error(
        "{}: {} has rope_type \"{}\", which braid does not implement (it has {}); it "
        "cannot run this model with the same positions",
        s.path, s.where, type_name, enum_choices<RopeType>());
  c.rope_type = *type;
  std::vector<std::string> allowed = fields_of(*type);
  for (const auto& [key, value] : s.j.items()) {
    if (key == "rope_type" || key == "type" || key == "rope_theta" ||
        key == "partial_rotary_factor")
      continue;
    bool ok = false;
    for (const std::string& a : allowed) ok = ok || a == key;
    if (!ok)
      user_error("{}: {} has field \"{}\", which rope_type \"{}\" does not take (it takes {})",
                 s.path, s.where, key, type_name, joined(allowed));
  }
  check_partial_rotary(s.j, s.where + ".", s.path);
  if (auto theta = s.number("rope_theta")) c.rope_theta = static_cast<float>(*theta);
  // Phi-3 style configs keep the pretraining length at the top level; transformers prefers it.
  std::optional<int64_t> original = s.integer("original_max_position_embeddings");
  if (hf.contains("original_max_position_embeddings") &&
      !hf["original_max_position_embeddings"].is_null())
    original = Section{hf, "config", s.path}.integer("original_max_position_embeddings");
  switch (*type) {
    case RopeType::Default:
      break;
    case RopeType::Linear:
      c.rope_factor = static_cast<float>(s.required_number("factor", type_name));
      break;
    case RopeType::Llama3:
      c.rope_factor = static_cast<float>(s.required_number("factor", type_name));
      c.rope_low_freq_factor = static_cast<float>(s.required_number("low_freq_factor", type_name));
      c.rope_high_freq_factor =
          static_cast<float>(s.required_number("high_freq_factor", type_name));
      c.rope_original_context = static_cast<int>(original.value_or(0));
      break;
    case RopeType::Yarn: {
      c.rope_original_context = static_cast<int>(original.value_or(0));
      const double orig = static_cast<double>(original.value_or(c.context_length));
      // factor null: the ratio of the context lengths, as transformers derives it.
      c.rope_factor = static_cast<float>(
          s.number("factor").value_or(static_cast<double>(c.context_length) / orig));
      // transformers reads these with `or`, so 0 means the default too.
      if (auto v = s.number("beta_fast"); v && *v != 0) c.rope_beta_fast = static_cast<float>(*v);
      if (auto v = s.number("beta_slow"); v && *v != 0) c.rope_beta_slow = static_cast<float>(*v);
      if (auto v = s.number("attention_factor")) {
        if (!(*v > 0))
          user_error("{}: {}.attention_factor is {}; expected > 0", s.path, s.where, *v);
        c.rope_attention_factor = static_cast<float>(*v);
      }
      if (auto v = s.number("mscale")) c.rope_mscale = static_cast<float>(*v);
      if (auto v = s.number("mscale_all_dim")) c.rope_mscale_all_dim = static_cast<float>(*v);
      if (s.has("truncate")) {
        if (!s.j["truncate"].is_boolean())
          user_error("{}: {}.truncate is {}; expected true or false", s.path, s.where,
                     s.j["truncate"].dump());
        c.rope_truncate = s.j["truncate"].get<bool>();
      }
      break;
    }
  }
  return c;
}

bool same_rope(const ModelConfig& a, const ModelConfig& b) {
  return a.rope_type == b.rope_type && a.rope_theta == b.rope_theta &&
         a.rope_factor == b.rope_factor && a.rope_low_freq_factor == b.rope_low_freq_factor &&
         a.rope_high_freq_factor == b.rope_high_freq_factor &&
         a.rope_original_context == b.rope_original_context &&
         a.rope_beta_fast == b.rope_beta_fast && a.rope_beta_slow == b.rope_beta_slow &&
         a.rope_attention_factor == b.rope_attention_factor && a.rope_mscale == b.rope_mscale &&
         a.rope_mscale_all_dim == b.rope_mscale_all_dim && a.rope_truncate == b.rope_truncate;
}

}  // namespace

void rope_from_hf(const json& hf, ModelConfig& c, const std::string& path) {
  check_partial_rotary(hf, "", path);
  ModelConfig base = c;
  if (hf.contains("rope_theta") && !hf["rope_theta"].is_null()) {
    if (!hf["rope_theta"].is_number())
      user_error("{}: rope_theta is {}; expected a number", path, hf["rope_theta"].dump());
    base.rope_theta = hf["rope_theta"].get<float>();
  }
  std::optional<ModelConfig> from_params, from_scaling;
  if (hf.contains("rope_parameters") && !hf["rope_parameters"].is_null())
    from_params = read_section({hf["rope_parameters"], "rope_parameters", path}, base, hf);
  if (hf.contains("rope_scaling") && !hf["rope_scaling"].is_null())
    from_scaling = read_section({hf["rope_scaling"], "rope_scaling", path}, base, hf);
  if (from_params && base.rope_theta != from_params->rope_theta && hf.contains("rope_theta") &&
      !hf["rope_theta"].is_null())
    user_error("{}: rope_theta {} differs from rope_parameters.rope_theta {}", path,
               hf["rope_theta"].dump(), hf["rope_parameters"]["rope_theta"].dump());
  if (from_params && from_scaling) {
    // rope_scaling has no theta of its own: compare with the one rope_parameters gives.
    from_scaling->rope_theta = from_params->rope_theta;
    if (!same_rope(*from_params, *from_scaling))
      user_error("{}: rope_parameters {} and rope_scaling {} describe different RoPE; keep one",
                 path, hf["rope_parameters"].dump(), hf["rope_scaling"].dump());
  }
  c = from_params ? *from_params : from_scaling ? *from_scaling : base;
}

void rope_to_hf(const ModelConfig& c, json& hf) {
  json p = json::object();
  p["rope_type"] = std::string(enum_name(c.rope_type));
  p["rope_theta"] = json_float(c.rope_theta);
  const int original = c.rope_original_context > 0 ? c.rope_original_context : c.context_length;
  switch (c.rope_type) {
    case RopeType::Default:
      break;
    case RopeType::Linear:
      p["factor"] = json_float(c.rope_factor);
      break;
    case RopeType::Llama3:
      p["factor"] = json_float(c.rope_factor);
      p["low_freq_factor"] = json_float(c.rope_low_freq_factor);
      p["high_freq_factor"] = json_float(c.rope_high_freq_factor);
      p["original_max_position_embeddings"] = original;
      break;
    case RopeType::Yarn:
      p["factor"] = json_float(c.rope_factor);
      p["original_max_position_embeddings"] = original;
      p["beta_fast"] = json_float(c.rope_beta_fast);
      p["beta_slow"] = json_float(c.rope_beta_slow);
      p["truncate"] = c.rope_truncate;
      if (c.rope_attention_factor > 0) p["attention_factor"] = json_float(c.rope_attention_factor);
      if (c.rope_mscale != 0) p["mscale"] = json_float(c.rope_mscale);
      if (c.rope_mscale_all_dim != 0) p["mscale_all_dim"] = json_float(c.rope_mscale_all_dim);
      break;
  }
  hf["rope_theta"] = json_float(c.rope_theta);
  hf["rope_parameters"] = p;
  if (c.rope_type == RopeType::Default) {
    hf["rope_scaling"] = nullptr;
  } else {
    json s = p;
    s.erase("rope_theta");
    hf["rope_scaling"] = s;
  }
}

}  // namespace braid
