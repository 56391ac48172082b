// Model loading from checkpoints, run directories and HF directories.
#include "launch/io/model_io.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "core/checksum.h"
#include "core/models/lora.h"
#include "data/file_util.h"
#include "data/tokenizer.h"
#include "launch/config/config.h"
#include "launch/config/config_json.h"
#include "launch/io/bnb_weights.h"
#include "launch/io/checkpoint.h"
#include "launch/io/hf_format.h"
#include "launch/io/hf_weights.h"
#include "launch/io/lora_adapter.h"
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
  if (fs::is_regular_file(path, ec) &&
      (path.extension() == ".safetensors" || path.filename() == kHfIndexFile))
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

// Streams the HF files: each file is mapped in turn and each wanted tensor read (widened to
// f32, transposed where HF stores it so) and handed to `sink`, then its pages are dropped, so
// host memory beyond what the sink keeps stays about one tensor.
void stream_hf_weights(const ModelConfig& cfg, const fs::path& dir, const WantedTensors& wanted,
                       const TensorSink& sink) {
  HfWeights w = HfWeights::open(dir);
  // Weights bitsandbytes quantised are planned under their own names and shapes.
  const BnbTensorView bnb = bnb_tensor_view(w);
  const HfImportPlan plan = plan_hf_import(cfg, bnb.tensors, w.source());
  // Dequantised on the host, whatever device the model is on.
  std::unique_ptr<ExecContext> host =
      bnb.quantised.empty() ? nullptr : std::make_unique<ExecContext>();
  std::vector<std::vector<const HfTensorSource*>> by_file(w.num_files());
  std::set<std::string> planned;
  for (const HfTensorSource& src : plan.params) {
    planned.insert(src.param);
    if (wanted.count(src.param)) by_file[w.file_of(src.file_name)].push_back(&src);
  }
  for (const auto& [name, shape] : wanted)
    BRAID_USER_CHECK(planned.count(name), "{}: tensor {} is missing", w.source(), name);
  if (!plan.tied_head.empty()) {
    // The files must hold the same bytes for the head and the embedding the config ties.
    const HfTensorSource& emb = plan.params.front();
    const size_t fh = w.file_of(plan.tied_head), fe = w.file_of(emb.file_name);
    const SafetensorsFile& head_file = w.file(fh);
    const SafetensorsFile& emb_file = w.file(fe);
    const SafetensorsInfo &hi = head_file.info(plan.tied_head), &ei = emb_file.info(emb.file_name);
    if (hi.shape != ei.shape || hi.dtype_name != ei.dtype_name ||
        std::memcmp(head_file.raw(plan.tied_head), emb_file.raw(emb.file_name),
                    hi.end - hi.begin) != 0)
      user_error(
          "{}: lm_head.weight differs from {} but the config ties them "
          "(tie_word_embeddings); set tie_word_embeddings false to import an untied head",
          w.source(), emb.param);
    w.close_file(fh);
    w.close_file(fe);
  }
  for (size_t i = 0; i < w.num_files(); ++i) {
    if (by_file[i].empty()) continue;
    const SafetensorsFile& f = w.file(i);
    for (const HfTensorSource* src : by_file[i]) {
      const Shape& expected = wanted.at(src->param);
      if (bnb.quantised.count(src->file_name)) {
        BRAID_USER_CHECK(!src->transposed, "{}: {} is quantised but stored transposed", f.path(),
                         src->file_name);
        const Tensor t = read_bnb_weight(*host, w, src->file_name);
        BRAID_USER_CHECK(t.shape() == expected, "{}: {} has shape {} but config.json implies {}",
                         f.path(), src->file_name, shape_str(t.shape()), shape_str(expected));
        sink(src->param, t);
        continue;
      }
      BRAID_USER_CHECK(f.dtype(src->file_name) != DType::I32,
                       "{}: {} is i32; expected a float tensor", f.path(), src->file_name);
      Tensor t = hf_tensor_to_braid(*src, f.get(src->file_name));
      f.drop_pages(src->file_name);
      BRAID_USER_CHECK(t.shape() == expected, "{}: {} has shape {} but config.json implies {}",
                       f.path(), src->file_name, shape_str(t.shape()), shape_str(expected));
      if (t.dtype() != DType::F32) t = t.to(DType::F32);  // bf16/f16 widened
      sink(src->param, t);
    }
    w.close_file(i);
  }
}

// Every parameter of `model`, by name, with its shape (a whole model: before any split).
WantedTensors wanted_of(const std::vector<Parameter*>& params) {
  WantedTensors w;
  for (const Parameter* p : params) w.emplace(p->name, p->value.shape());
  return w;
}

// Copies each streamed tensor into its parameter.
TensorSink copy_into(const std::vector<Parameter*>& params) {
  std::map<std::string, Parameter*> by_name;
  for (Parameter* p : params) by_name.emplace(p->name, p);
  return
      [by_name](const std::string& name, const Tensor& t) { by_name.at(name)->value.copy_from(t); };
}

void load_hf_weights(Transformer& model, const fs::path& dir) {
  stream_hf_weights(model.config(), dir, wanted_of(model.parameters()),
                    copy_into(model.parameters()));
}

// The LoRA pairs a checkpoint holds (braid names) and the scale its run's lora section gives.
PeftAdapter checkpoint_adapter(const LoadedCheckpoint& ck, int* rank) {
  PeftAdapter a;
  for (const std::string& n : ck.model.names())
    if (n.ends_with(".lora_A.weight") || n.ends_with(".lora_B.weight"))
      a.tensors.emplace_back(n, ck.model.get(n).to(DType::F32));
  if (a.tensors.empty()) return a;
  BRAID_USER_CHECK(ck.state.is_object() && ck.state.contains("config_yaml") &&
                       ck.state["config_yaml"].is_string(),
                   "{} holds LoRA adapters but no run config to scale them by; pass --no-adapter "
                   "to use the base model",
                   ck.path);
  const RunConfig rc = parse_run_config(ck.state["config_yaml"].get<std::string>(),
                                        ck.path + "/manifest.json (config_yaml)");
  const LoraConfig& l = rc.lora;
  BRAID_USER_CHECK(l.rank > 0, "{} holds LoRA adapters but its config has lora.rank 0", ck.path);
  a.scale = l.rslora ? l.alpha / std::sqrt(static_cast<float>(l.rank))
                     : l.alpha / static_cast<float>(l.rank);
  *rank = l.rank;
  return a;
}

// A QLoRA run's checkpoint holds no base weight of its quantised linears (lora.base_quant):
// they are read from the run's lora.init_from and quantised and read back as training
// quantised them (the same codes, block size and double quantisation), so `params` hold the
// dequantised base the adapters were trained on. Anything else missing is the usual error.
void load_quantised_bases(Transformer& model, const std::vector<Parameter*>& params,
                          const LoadedCheckpoint& ck) {
  std::optional<RunConfig> rc;
  if (ck.state.is_object() && ck.state.contains("config_yaml") &&
      ck.state["config_yaml"].is_string())
    rc = parse_run_config(ck.state["config_yaml"].get<std::string>(),
                          ck.path + "/manifest.json (config_yaml)");
  const bool qlora = rc && rc->lora.enabled() && rc->lora.base_quant != BaseQuant::None;
  if (!qlora) return load_weights(params, ck.model);  // names the first missing tensor
  const LoraConfig& l = rc->lora;
  BRAID_USER_CHECK(!l.init_from.empty(),
                   "{} was trained with lora.base_quant {} but names no lora.init_from: its "
                   "quantised base weights are not in the checkpoint",
                   ck.path, enum_name(l.base_quant));
  for (const Parameter* p : params) {
    const std::string path = p->name.substr(0, p->name.rfind('.'));
    BRAID_USER_CHECK(p->name.ends_with(".weight") && lora_targets(path, l.targets),
                     "{}: has no tensor {} (not a quantised LoRA base of lora.targets)", ck.path,
                     p->name);
  }
  if (ck.state.contains("quantised_base"))
    check_quantised_base(ck.state["quantised_base"], ck.path);
  ExecContext ctx;  // on the host, whatever device `model` is on
  Transformer base(ctx, model.config());
  BRAID_USER_CHECK(std::filesystem::exists(l.init_from),
                   "{} keeps its quantised base by reference to lora.init_from {}, which does "
                   "not exist (run merge-lora/eval from the directory the run was started in, "
                   "or restore it)",
                   ck.path, l.init_from);
  init_weights_from(base, l.init_from);
  for (Parameter* p : params) {
    const Parameter* b = base.find_parameter(p->name);
    BRAID_USER_CHECK(b && b->value.shape() == p->value.shape(),
                     "lora.init_from {} has no {} of shape {}", l.init_from, p->name,
                     shape_str(p->value.shape()));
    p->value.copy_from(quantized_base_readback(ctx, b->value, l));
  }
}

// Loads weights into model (and, when asked, folds the checkpoint's LoRA adapters in).
void load_source_weights(Transformer& model, const ModelSource& src, bool apply_adapter,
                         LoadedModel* out) {
  if (src.hf) {
    load_hf_weights(model, src.dir);
    return;
  }
  LoadedCheckpoint ck = CheckpointManager::load(src.dir.string());
  std::vector<Parameter*> stored, quantised;
  for (Parameter* p : model.parameters())
    (ck.model.contains(p->name) ? stored : quantised).push_back(p);
  load_weights(stored, ck.model);
  if (!quantised.empty()) load_quantised_bases(model, quantised, ck);
  if (!out) return;
  out->step = ck.step;
  int rank = 0;
  const PeftAdapter adapter = checkpoint_adapter(ck, &rank);
  out->adapter_modules = static_cast<int>(adapter.tensors.size() / 2);
  out->adapter_rank = rank;
  out->adapter_scale = adapter.scale;
  if (apply_adapter && out->adapter_modules > 0) {
    merge_peft_adapter(model, adapter);
    out->adapter_applied = true;
  }
}

std::string find_tokenizer(const ModelSource& src) {
  if (std::string t = tokenizer_file_in(src.dir.string()); !t.empty()) return t;
  return src.run_dir.empty() ? "" : tokenizer_file_in(src.run_dir);
}

}  // namespace

std::string LoadedModel::adapter_note() const {
  if (adapter_modules == 0) return "";
  const std::string what = fmt::format("{} LoRA-wrapped linears, rank {}, scale {}",
                                       adapter_modules, adapter_rank, adapter_scale);
  return adapter_applied ? fmt::format("LoRA adapter applied ({})", what)
                         : fmt::format("base model only, LoRA adapter not applied ({})", what);
}

LoadedModel load_model(const std::string& path, Device device, bool apply_adapter, DType weights) {
  BRAID_CHECK(weights == DType::F32 || weights == DType::BF16 || weights == DType::F16,
              "load_model: weights in {}; expected f32, bf16 or f16", dtype_name(weights));
  const ModelSource src = resolve(path);
  LoadedModel out;
  out.ctx = make_context(device);
  if (device.is_cpu() && weights == DType::F32) {
    out.model = std::make_unique<Transformer>(*out.ctx, config_of(src));
    load_source_weights(*out.model, src, apply_adapter, &out);
  } else {
    // Read (and fold the adapter) in f32 on the host, then each tensor converted and moved in
    // turn into a model built with meta weights on `device`.
    const std::unique_ptr<ExecContext> host = make_context(Device::cpu());
    std::unique_ptr<Transformer> read = std::make_unique<Transformer>(*host, config_of(src));
    load_source_weights(*read, src, apply_adapter, &out);
    {
      DeferredWeights deferred;
      out.model = std::make_unique<Transformer>(*out.ctx, config_of(src));
    }
    for (Parameter* p : out.model->parameters()) {
      Parameter* h = read->find_parameter(p->name);
      BRAID_CHECK(h != nullptr, "load_model: {} was not read", p->name);
      const Tensor v = weights == DType::F32 ? h->value : h->value.to(weights, MemCategory::Other);
      h->value = Tensor();  // the f32 host copy goes as soon as it is converted
      p->value = out.ctx->empty(v.shape(), weights, MemCategory::Weights);
      p->value.copy_from(v);
    }
    out.model->refresh_parameters();
  }
  out.source = src.dir.string();
  out.run_dir = src.run_dir;
  out.tokenizer = find_tokenizer(src);
  return out;
}

DType inference_dtype(const std::string& value, Device device, const char* flag) {
  if (value == "auto") return device.is_cpu() ? DType::F32 : DType::BF16;
  if (value == "fp32") return DType::F32;
  if (value == "bf16") return DType::BF16;
  if (value == "fp16") return DType::F16;
  user_error("{} {}: expected auto, fp32, bf16 or fp16", flag, value);
}

nlohmann::json quantised_base_record(const LoraConfig& lora) {
  if (!lora.enabled() || lora.base_quant == BaseQuant::None || lora.init_from.empty())
    return nullptr;
  const fs::path dir = fs::absolute(lora.init_from).lexically_normal();
  std::vector<std::string> names;
  std::error_code ec;
  if (fs::is_directory(dir, ec))
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string n = e.path().filename().string();
      if (e.is_regular_file() && n.starts_with("model") && n.ends_with(".safetensors"))
        names.push_back(n);
    }
  std::sort(names.begin(), names.end());
  nlohmann::json files = nlohmann::json::array();
  for (const std::string& n : names) {
    const FileChecksum c = checksum_file((dir / n).string());
    files.push_back({{"name", n},
                     {"bytes", c.bytes},
                     {"checksum", fmt::format("{}:{:016x}", kChecksumMix64, c.checksum)}});
  }
  return {{"init_from", dir.string()}, {"files", files}};
}

void check_quantised_base(const nlohmann::json& recorded, const std::string& what) {
  try {
    const fs::path dir = recorded.at("init_from").get<std::string>();
    for (const nlohmann::json& f : recorded.at("files")) {
      const fs::path p = dir / f.at("name").get<std::string>();
      std::error_code ec;
      BRAID_USER_CHECK(fs::is_regular_file(p, ec),
                       "{} keeps its quantised base by reference to {}, which is missing; "
                       "restore the base model it was trained from (lora.init_from)",
                       what, p.string());
      const FileChecksum c = checksum_file(p.string());
      const std::string now = fmt::format("{}:{:016x}", kChecksumMix64, c.checksum);
      BRAID_USER_CHECK(now == f.at("checksum").get<std::string>(),
                       "{} keeps its quantised base by reference to {}, which has changed "
                       "since (checksum {}, recorded {}); its adapters were trained on the old "
                       "base: restore that file (lora.init_from)",
                       what, p.string(), now, f.at("checksum").get<std::string>());
    }
  } catch (const nlohmann::json::exception& e) {
    user_error("{}: malformed quantised_base record in its manifest ({})", what, e.what());
  }
}

std::string model_tokenizer_file(const std::string& path) { return find_tokenizer(resolve(path)); }

ModelConfig model_config_at(const std::string& path) { return config_of(resolve(path)); }

void stream_model_weights(const std::string& path, const WantedTensors& wanted,
                          const TensorSink& sink) {
  const ModelSource src = resolve(path);
  if (src.hf) return stream_hf_weights(config_of(src), src.dir, wanted, sink);
  // A braid checkpoint: its tensors by name. A QLoRA run's checkpoint keeps its quantised base
  // by reference; then the model is loaded whole, as load_model reads it.
  LoadedCheckpoint ck = CheckpointManager::load(src.dir.string());
  bool all_stored = true;
  for (const auto& [name, shape] : wanted) all_stored = all_stored && ck.model.contains(name);
  if (!all_stored) {
    const LoadedModel lm = load_model(path);
    for (const auto& [name, shape] : wanted) {
      const Parameter* p = lm.model->find_parameter(name);
      BRAID_USER_CHECK(p && p->value.shape() == shape,
                       "{}: has no tensor {} of shape {}; it was written for a different model",
                       src.dir.string(), name, shape_str(shape));
      sink(name, p->value);
    }
    return;
  }
  for (const auto& [name, shape] : wanted) {
    check_tensor_matches(ck.model, name, shape, DType::F32);
    sink(name, ck.model.get(name));
  }
}

void init_weights_from(Transformer& model, const std::string& path) {
  const ModelSource src = resolve(path);
  load_source_weights(model, src, false, nullptr);
}

}  // namespace braid
