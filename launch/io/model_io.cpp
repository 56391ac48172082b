// Model loading from checkpoints, run directories and HF directories.
#include "launch/io/model_io.h"

#include <algorithm>
#include <filesystem>

#include "data/file_util.h"
#include "data/tokenizer.h"
#include "launch/config/config_json.h"
#include "launch/io/checkpoint.h"
#include "launch/io/hf_format.h"
#include "launch/io/model_limits.h"
#include "launch/train/exec_setup.h"

namespace braid {

namespace fs = std::filesystem;

std::vector<std::pair<std::string, Tensor>> named_weights(const std::vector<Parameter*>& params) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const Parameter* p : params)
    if (!p->replica) out.emplace_back(p->name, p->value);
  return out;
}

std::vector<std::pair<std::string, Tensor>> named_weights(const Transformer& model) {
  return named_weights(model.parameters());
}

void load_weights(const std::vector<Parameter*>& params, const CheckpointTensors& tensors) {
  for (Parameter* p : params) {
    check_tensor_matches(tensors, p->name, p->value.shape(), DType::F32);
    p->value.copy_from(tensors.get(p->name));
  }
}

void load_weights(Transformer& model, const CheckpointTensors& tensors) {
  load_weights(model.parameters(), tensors);
}

std::string tokenizer_file_in(const std::string& dir) {
  std::error_code ec;
  for (const char* name : {kTokenizerFile, kLegacyTokenizerFile})
    if (fs::is_regular_file(fs::path(dir) / name, ec)) return (fs::path(dir) / name).string();
  return "";
}

namespace {

// A resolved model location: a braid checkpoint directory or an HF directory.
struct ModelSource {
  fs::path dir;
  bool hf = false;
  std::string run_dir;  // for a braid checkpoint inside a run directory
};

ModelSource resolve(const std::string& path_in) {
  fs::path path = fs::path(path_in).lexically_normal();
  if (!path.has_filename() && path.has_parent_path()) path = path.parent_path();  // "dir/"
  std::error_code ec;
  BRAID_USER_CHECK(fs::exists(path, ec),
                   "{} does not exist; expected a checkpoint directory, a "
                   "run directory or an HF model directory",
                   path_in);
  if (fs::is_regular_file(path, ec) && path.extension() == ".safetensors")
    path = path.parent_path();
  BRAID_USER_CHECK(fs::is_directory(path, ec),
                   "{} is not a directory; expected a checkpoint "
                   "directory, a run directory or an HF model directory",
                   path_in);
  ModelSource src;
  if (fs::exists(path / "checkpoints", ec)) {
    CheckpointManager mgr(path.string(), 1);
    auto latest = mgr.latest();
    BRAID_USER_CHECK(latest.has_value(), "{} is a run directory without a complete checkpoint",
                     path.string());
    src.run_dir = path.string();
    path = *latest;
  } else if (path.parent_path().filename() == "checkpoints") {
    src.run_dir = path.parent_path().parent_path().string();
  }
  src.dir = path;
  if (fs::exists(path / "manifest.json", ec)) return src;
  if (fs::exists(path / "config.json", ec)) {
    src.hf = true;
    return src;
  }
  user_error("{} holds neither manifest.json (braid checkpoint) nor config.json (HF model)",
             path.string());
}

ModelConfig checked(ModelConfig cfg, const std::string& where) {
  try {
    cfg.validate();
    check_model_fits(cfg, 4);
  } catch (const ConfigError& e) {
    user_error("{}: model.{}: {}", where, e.key(), e.what());
  }
  return cfg;
}

ModelConfig config_of(const ModelSource& src) {
  if (src.hf) {
    const std::string p = (src.dir / "config.json").string();
    return checked(model_config_from_hf(read_json_file(p, "HF config"), p), p);
  }
  const std::string p = (src.dir / "manifest.json").string();
  const nlohmann::json m = read_json_file(p, "checkpoint manifest");
  BRAID_USER_CHECK(m.is_object() && m.contains("state") && m["state"].is_object() &&
                       m["state"].contains("model"),
                   "{} has no model config", p);
  ModelConfig cfg;
  fields_from_json(cfg, m["state"]["model"], p);
  return checked(cfg, p);
}

void load_hf_weights(Transformer& model, const fs::path& dir) {
  const ModelConfig& cfg = model.config();
  SafetensorsFile f = SafetensorsFile::open((dir / "model.safetensors").string());
  std::vector<std::pair<std::string, Tensor>> hf;
  for (const std::string& n : f.names()) hf.emplace_back(n, f.get(n));
  auto named = from_hf_tensors(cfg, hf, f.path());
  for (Parameter* p : model.parameters()) {
    auto it = std::find_if(named.begin(), named.end(), [&](auto& e) { return e.first == p->name; });
    BRAID_USER_CHECK(it != named.end(), "{}: tensor {} is missing", f.path(), p->name);
    BRAID_USER_CHECK(it->second.shape() == p->value.shape(),
                     "{}: {} has shape {} but config.json implies {}", f.path(), p->name,
                     shape_str(it->second.shape()), shape_str(p->value.shape()));
    BRAID_USER_CHECK(it->second.dtype() != DType::I32, "{}: {} is i32; expected a float tensor",
                     f.path(), p->name);
    p->value.copy_from(it->second.to(DType::F32));  // bf16/f16 files are widened
  }
}

// Loads weights into model; returns the checkpoint's step (0 for HF).
int64_t load_source_weights(Transformer& model, const ModelSource& src) {
  if (src.hf) {
    load_hf_weights(model, src.dir);
    return 0;
  }
  LoadedCheckpoint ck = CheckpointManager::load(src.dir.string());
  load_weights(model, ck.model);
  return ck.step;
}

std::string find_tokenizer(const ModelSource& src) {
  if (std::string t = tokenizer_file_in(src.dir.string()); !t.empty()) return t;
  return src.run_dir.empty() ? "" : tokenizer_file_in(src.run_dir);
}

}  // namespace

LoadedModel load_model(const std::string& path, Device device) {
  const ModelSource src = resolve(path);
  LoadedModel out;
  out.ctx = make_context(device);
  out.model = std::make_unique<Transformer>(*out.ctx, config_of(src));
  out.step = load_source_weights(*out.model, src);
  out.source = src.dir.string();
  out.run_dir = src.run_dir;
  out.tokenizer = find_tokenizer(src);
  return out;
}

ModelConfig model_config_at(const std::string& path) { return config_of(resolve(path)); }

void init_weights_from(Transformer& model, const std::string& path) {
  const ModelSource src = resolve(path);
  load_source_weights(model, src);
}

}  // namespace braid
