// Model loading from checkpoints, run directories and HF directories.
#include "launch/model_io.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "launch/checkpoint.h"
#include "launch/config_json.h"
#include "launch/exec_setup.h"
#include "launch/hf_format.h"

namespace braid {

namespace fs = std::filesystem;

std::vector<std::pair<std::string, Tensor>> named_weights(const Transformer& model) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const Parameter* p : model.parameters())
    if (!p->replica) out.emplace_back(p->name, p->value);
  return out;
}

void load_weights(Transformer& model, const SafetensorsFile& file) {
  for (Parameter* p : model.parameters()) {
    check_tensor_matches(file, p->name, p->value.shape(), DType::F32, file.path());
    p->value.copy_from(file.get(p->name));
  }
}

namespace {

std::string find_tokenizer(const fs::path& start) {
  // A checkpoint lives at <run>/checkpoints/step-N; the run directory holds tokenizer.json.
  for (fs::path d = start; !d.empty(); d = d.parent_path()) {
    if (fs::exists(d / "tokenizer.json")) return (d / "tokenizer.json").string();
    if (d == d.parent_path() || d.filename() == "runs") break;
  }
  return "";
}

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  BRAID_USER_CHECK(in.good(), "cannot read {}", p.string());
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    user_error("{} is not valid JSON: {}", p.string(), e.what());
  }
}

}  // namespace

LoadedModel load_model(const std::string& path_in) {
  fs::path path = path_in;
  BRAID_USER_CHECK(fs::exists(path), "{} does not exist; expected a checkpoint directory, a run "
                   "directory or an HF model directory", path_in);
  if (fs::is_regular_file(path) && path.extension() == ".safetensors") path = path.parent_path();
  if (fs::exists(path / "checkpoints")) {
    CheckpointManager mgr(path.string(), 1);
    auto latest = mgr.latest();
    BRAID_USER_CHECK(latest.has_value(), "{} is a run directory without a complete checkpoint",
                     path.string());
    path = *latest;
  }
  LoadedModel out;
  out.ctx = make_cpu_context();
  if (fs::exists(path / "manifest.json")) {
    LoadedCheckpoint ck = CheckpointManager::load(path.string());
    ModelConfig cfg;
    BRAID_USER_CHECK(ck.state.contains("model"), "{}/manifest.json has no model config",
                     path.string());
    fields_from_json(cfg, ck.state.at("model"), (path / "manifest.json").string());
    cfg.validate();
    out.model = std::make_unique<Transformer>(*out.ctx, cfg);
    load_weights(*out.model, ck.model);
    out.step = ck.step;
  } else if (fs::exists(path / "config.json")) {
    ModelConfig cfg = model_config_from_hf(read_json(path / "config.json"), (path / "config.json").string());
    cfg.validate();
    out.model = std::make_unique<Transformer>(*out.ctx, cfg);
    SafetensorsFile f = SafetensorsFile::open((path / "model.safetensors").string());
    std::vector<std::pair<std::string, Tensor>> hf;
    for (const std::string& n : f.names()) hf.emplace_back(n, f.get(n));
    auto named = from_hf_tensors(cfg, hf, f.path());
    for (Parameter* p : out.model->parameters()) {
      auto it = std::find_if(named.begin(), named.end(), [&](auto& e) { return e.first == p->name; });
      BRAID_USER_CHECK(it != named.end(), "{}: tensor {} is missing", f.path(), p->name);
      BRAID_USER_CHECK(it->second.shape() == p->value.shape(),
                       "{}: {} has shape {} but config.json implies {}", f.path(), p->name,
                       shape_str(it->second.shape()), shape_str(p->value.shape()));
      BRAID_USER_CHECK(it->second.dtype() != DType::I32, "{}: {} is i32; expected a float tensor",
                       f.path(), p->name);
      p->value.copy_from(it->second.to(DType::F32));  // bf16/f16 files are widened
    }
  } else {
    user_error("{} holds neither manifest.json (braid checkpoint) nor config.json (HF model)",
               path.string());
  }
  out.source = path.string();
  out.tokenizer = find_tokenizer(fs::absolute(path));
  return out;
}

}  // namespace braid
