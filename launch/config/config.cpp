// Loading a RunConfig: YAML file -> fields, --set overrides, path resolution, located validation.
#include "launch/config/config.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <cctype>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/input_guard.h"
#include "launch/config/config_schema.h"
#include "launch/config/edit_distance.h"
#include "launch/io/model_io.h"

namespace braid {

namespace {

namespace fs = std::filesystem;

// Where each value was set, for messages: "cfg.yaml:12" or "--set optim.lr=-1". Keys are
// section names and full keys ("optim.lr").
using Origins = std::map<std::string, std::string>;

std::string describe_node(const YAML::Node& n) {
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a mapping";
  if (n.IsNull()) return "nothing (null)";
  return fmt::format("'{}'", n.Scalar());
}

std::string location(const std::string& source, const YAML::Mark& mark) {
  if (mark.line < 0) return source;
  return fmt::format("{}:{}", source, mark.line + 1);
}

std::string join(const std::vector<std::string>& items) {
  std::string s;
  for (size_t i = 0; i < items.size(); ++i) s += (i ? ", " : "") + items[i];
  return s;
}

// Edit distance, except that a name containing the typed one (warmup -> warmup_steps) or
// differing only in case counts as one edit: those are the usual slips.
size_t key_distance(const std::string& typed, const std::string& valid) {
  std::string a = typed, b = valid;
  for (auto* s : {&a, &b})
    for (char& c : *s) c = char(std::tolower(static_cast<unsigned char>(c)));
  const size_t d = edit_distance(a, b);
  if (d > 1 && !a.empty() && (b.find(a) != std::string::npos || a.find(b) != std::string::npos))
    return 1;
  if (d == 0 && typed != valid) return 1;
  return d;
}

std::string closest_section(const std::string& name) {
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const auto& s : list_config_sections()) {
    const size_t d = key_distance(name, s);
    if (d < best_d) best_d = d, best = s;
  }
  return best;
}

// The full key nearest to `section.key`: keys are compared by name over every section, so a
// key put in the wrong section is found; an equally near key of the same section wins.
std::string closest_key(const std::vector<ConfigField>& fields, const std::string& section,
                        const std::string& key) {
  std::string best;
  size_t best_score = SIZE_MAX;
  for (const auto& f : fields) {
    const size_t score = 2 * key_distance(key, f.key) + (f.section == section ? 0 : 1);
    if (score < best_score) best_score = score, best = f.full_key();
  }
  return best;
}

ConfigField* find_field(std::vector<ConfigField>& fields, const std::string& section,
                        const std::string& key) {
  for (auto& f : fields)
    if (f.section == section && f.key == key) return &f;
  return nullptr;
}

bool is_section(const std::string& name) {
  for (const auto& s : list_config_sections())
    if (s == name) return true;
  return false;
}

YAML::Node parse_yaml(const std::string& text, const std::string& source) {
  try {
    return YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp's own text for this is "bad file", which says nothing.
    user_error("{}: malformed YAML: lists/mappings nested more than {} levels deep; a braid "
               "config has two levels (section, then key: value)",
               location(source, e.mark), e.depth() - 1);
  } catch (const YAML::Exception& e) {
    user_error("{}: malformed YAML: {}", location(source, e.mark), e.msg);
  }
}

void map_yaml(RunConfig& cfg, const YAML::Node& root, const std::string& source, Origins& origins) {
  if (!root.IsDefined() || root.IsNull()) return;  // an empty file keeps every default
  if (!root.IsMap())
    user_error("{}: expected a mapping of sections ({}) at the top level, got {}",
               location(source, root.Mark()), join(list_config_sections()), describe_node(root));
  auto fields = list_config_fields(cfg);
  std::set<std::string> seen_sections;
  for (const auto& sec : root) {
    const std::string at = location(source, sec.first.Mark());
    if (!sec.first.IsScalar())
      user_error("{}: expected a section name ({}), got {}", at, join(list_config_sections()),
                 describe_node(sec.first));
    const std::string name = sec.first.Scalar();
    if (!is_section(name))
      user_error("{}: unknown section `{}`; did you mean `{}`? (sections: {})", at, name,
                 closest_section(name), join(list_config_sections()));
    if (!seen_sections.insert(name).second)
      user_error("{}: section `{}` appears twice; put all its keys under one `{}:`", at, name,
                 name);
    origins[name] = at;
    const YAML::Node& body = sec.second;
    if (body.IsNull()) continue;
    if (!body.IsMap())
      user_error("{}: section `{}` must be a mapping of `key: value` lines, got {}", at, name,
                 describe_node(body));
    std::set<std::string> seen_keys;
    for (const auto& kv : body) {
      const std::string kat = location(source, kv.first.Mark());
      if (!kv.first.IsScalar())
        user_error("{}: expected a key of `{}`, got {}", kat, name, describe_node(kv.first));
      const std::string key = kv.first.Scalar();
      const std::string full = name + "." + key;
      ConfigField* f = find_field(fields, name, key);
      if (!f)
        throw ConfigError(full, fmt::format("{}: unknown key `{}`; did you mean `{}`?", kat, full,
                                            closest_key(fields, name, key)));
      if (!seen_keys.insert(key).second)
        throw ConfigError(full, fmt::format("{}: key `{}` appears twice", kat, full));
      if (auto err = read_field(kv.second, f->ptr))
        throw ConfigError(full, fmt::format("{}: {}: {}", kat, full, *err));
      origins[full] = kat;
    }
  }
}

void apply_override_at(RunConfig& cfg, const std::string& assignment, Origins& origins) {
  const std::string what = "--set " + assignment;
  const size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    user_error("{}: expected section.key=value, e.g. --set optim.lr=1e-3", what);
  const std::string full = assignment.substr(0, eq);
  auto fields = list_config_fields(cfg);
  const size_t dot = full.find('.');
  if (dot == std::string::npos)
    user_error("{}: expected section.key=value; did you mean `{}`?", what,
               closest_key(fields, "", full));
  const std::string section = full.substr(0, dot), key = full.substr(dot + 1);
  if (!is_section(section))
    user_error("{}: unknown section `{}`; did you mean `{}`? (sections: {})", what, section,
               closest_section(section), join(list_config_sections()));
  ConfigField* f = find_field(fields, section, key);
  if (!f)
    throw ConfigError(full, fmt::format("{}: unknown key `{}`; did you mean `{}`?", what, full,
                                        closest_key(fields, section, key)));
  YAML::Node value;
  try {
    value = YAML::Load(assignment.substr(eq + 1));
  } catch (const YAML::Exception& e) {
    throw ConfigError(full,
                      fmt::format("{}: {}: the value is not valid YAML: {}", what, full, e.msg));
  }
  if (auto err = read_field(value, f->ptr))
    throw ConfigError(full, fmt::format("{}: {}: {}", what, full, *err));
  origins[full] = what;
}

// Rethrows a component's ConfigError with the full key and where that key was set.
[[noreturn]] void throw_located(const std::string& full, const std::string& message,
                                const Origins& origins, const std::string& source) {
  if (auto it = origins.find(full); it != origins.end())
    throw ConfigError(full, fmt::format("{}: {}: {}", it->second, full, message));
  if (!source.empty())
    throw ConfigError(full, fmt::format("{}: {}: {} ({} is not set in the file, so it has its "
                                        "default; set it there or with --set {}=...)",
                                        source, full, message, full, full));
  throw ConfigError(full, fmt::format("{}: {}", full, message));
}

struct SectionValidator {
  const Origins& origins;
  const std::string& source;
  template <class S>
  void section(std::string_view name, S& s) {
    try {
      s.validate();
    } catch (const ConfigError& e) {
      throw_located(std::string(name) + "." + e.key(), e.what(), origins, source);
    }
  }
};

void validate_located(const RunConfig& cfg, const Origins& origins, const std::string& source) {
  RunConfig copy = cfg;  // visit_sections is non-const; validation only reads
  SectionValidator v{origins, source};
  copy.visit_sections(v);
  // Rules that involve two sections.
  if (cfg.parallel.backend == CommBackend::Nccl && cfg.train.device == DeviceChoice::Cpu)
    throw_located("parallel.backend",
                  "backend is nccl but train.device is cpu; NCCL moves GPU memory only: set "
                  "train.device: cuda (or auto), or parallel.backend: mpi or auto",
                  origins, source);
  if (!cfg.run.init_from.empty() && !cfg.lora.init_from.empty())
    throw_located("lora.init_from",
                  fmt::format("both run.init_from ({}) and lora.init_from ({}) name a model to "
                              "start from; a LoRA run's base is lora.init_from: drop "
                              "run.init_from",
                              cfg.run.init_from, cfg.lora.init_from),
                  origins, source);
  if (cfg.data.seq_len > cfg.model.context_length) {
    auto ctx = origins.find("model.context_length");
    throw_located("data.seq_len",
                  fmt::format("seq_len is {} but model.context_length is {}{}; expected "
                              "data.seq_len <= model.context_length",
                              cfg.data.seq_len, cfg.model.context_length,
                              ctx == origins.end() ? " (default)" : " (" + ctx->second + ")"),
                  origins, source);
  }
}

// run.init_from names the model: its config replaces the model section. A model key the file
// or --set gives anyway must agree with it.
void take_model_from_init(RunConfig& cfg, const Origins& origins) {
  ModelConfig src;
  try {
    src = model_config_at(cfg.run.init_from);
  } catch (const UserError& e) {
    throw_located("run.init_from", e.what(), origins, "");
  }
  RunConfig want = cfg;
  want.model = src;
  const auto want_fields = list_config_fields(want), given_fields = list_config_fields(cfg);
  for (size_t i = 0; i < given_fields.size(); ++i) {
    const ConfigField& g = given_fields[i];
    if (g.section == "model" && origins.count(g.full_key()) &&
        !field_values_equal(g.ptr, want_fields[i].ptr))
      throw_located(g.full_key(),
                    fmt::format("{} is {} but run.init_from {} has {}; drop the key (the model "
                                "shape comes from init_from)",
                                g.full_key(), format_field(g.ptr), cfg.run.init_from,
                                format_field(want_fields[i].ptr)),
                    origins, "");
  }
  cfg.model = src;
}

std::string read_text_file(const std::string& path) { return read_regular_file(path, "config file"); }

}  // namespace

RunConfig parse_run_config(const std::string& yaml_text, const std::string& source) {
  RunConfig cfg;
  Origins origins;
  map_yaml(cfg, parse_yaml(yaml_text, source), source, origins);
  return cfg;
}

void apply_override(RunConfig& cfg, const std::string& assignment) {
  Origins origins;
  apply_override_at(cfg, assignment, origins);
}

void validate_run_config(const RunConfig& cfg) { validate_located(cfg, Origins{}, ""); }

RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides) {
  const std::string text = read_text_file(path);
  RunConfig cfg;
  Origins origins;
  map_yaml(cfg, parse_yaml(text, path), path, origins);
  // A data directory named in the file is relative to the file, so configs work from any cwd.
  if (!cfg.data.dir.empty() && fs::path(cfg.data.dir).is_relative())
    cfg.data.dir = (fs::absolute(path).parent_path() / cfg.data.dir).lexically_normal().string();
  // So are the models named there (run.init_from and lora.init_from alike).
  for (auto [key, value] : {std::pair{"run.init_from", &cfg.run.init_from},
                            std::pair{"lora.init_from", &cfg.lora.init_from}})
    if (!value->empty() && fs::path(*value).is_relative() && origins.count(key))
      *value = (fs::absolute(path).parent_path() / *value).lexically_normal().string();
  for (const auto& o : overrides) apply_override_at(cfg, o, origins);
  // One typed on the command line is relative to where the command runs.
  if (!cfg.data.dir.empty() && fs::path(cfg.data.dir).is_relative())
    cfg.data.dir = fs::absolute(cfg.data.dir).lexically_normal().string();
  if (!cfg.lora.init_from.empty())
    cfg.lora.init_from = fs::absolute(cfg.lora.init_from).lexically_normal().string();
  if (!cfg.run.init_from.empty()) {
    cfg.run.init_from = fs::absolute(cfg.run.init_from).lexically_normal().string();
    take_model_from_init(cfg, origins);
  }
  validate_located(cfg, origins, path);
  // data.epochs without train.steps: the run is that many passes (0: counted by `braid train`
  // from the data, launch/train/train_run.cpp).
  if (cfg.data.epochs > 0 && !origins.count("train.steps")) cfg.train.steps = 0;
  try {
    check_run_config_environment(cfg);
  } catch (const ConfigError& e) {
    throw_located(e.key(), e.what(), origins, path);
  }
  for (const std::string& w : config_warnings(cfg)) std::fprintf(stderr, "warning: %s\n", w.c_str());
  return cfg;
}

}  // namespace braid
