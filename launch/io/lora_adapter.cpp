// PEFT adapter files (write, read) and folding adapters into the base weights.
#include "launch/io/lora_adapter.h"

#include <cmath>
#include <fstream>
#include <set>

#include "core/models/lora.h"
#include "core/safetensors.h"
#include "launch/io/hf_format.h"

namespace braid {

namespace fs = std::filesystem;

namespace {
constexpr const char* kPrefix = "base_model.model.";
const std::string kA = ".lora_A.weight", kB = ".lora_B.weight";

}  // namespace

std::string peft_tensor_name(const std::string& braid_name) { return kPrefix + braid_name; }

void save_peft_adapter(const Transformer& model, const LoraConfig& cfg, const std::string& base,
                       const fs::path& dir) {
  NamedTensors tensors;
  std::set<std::string> modules;  // the last path component of every wrapped Linear
  const_cast<Transformer&>(model).visit([&](Module& m) {
    if (auto* l = dynamic_cast<LoraLinear*>(&m)) {
      tensors.emplace_back(peft_tensor_name(l->lora_A.name), l->lora_A.value);
      tensors.emplace_back(peft_tensor_name(l->lora_B.name), l->lora_B.value);
      modules.insert(m.path().substr(m.path().rfind('.') + 1));
    }
  });
  BRAID_CHECK(!tensors.empty(), "save_peft_adapter: the model has no LoRA adapters");
  nlohmann::json j = {{"peft_type", "LORA"},
                      {"task_type", "CAUSAL_LM"},
                      {"r", cfg.rank},
                      {"lora_alpha", json_float(cfg.alpha)},
                      {"lora_dropout", json_float(cfg.dropout)},
                      {"target_modules", std::vector<std::string>(modules.begin(), modules.end())},
                      {"use_rslora", cfg.rslora},
                      {"fan_in_fan_out", !model.config().is_llama()},
                      {"bias", "none"},
                      {"base_model_name_or_path", base},
                      {"inference_mode", true},
                      {"init_lora_weights", true},
                      {"modules_to_save", nullptr}};
  const fs::path tmp = dir.string() + ".tmp-braid";
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  save_safetensors((tmp / "adapter_model.safetensors").string(), tensors, {{"format", "pt"}});
  std::ofstream(tmp / "adapter_config.json") << j.dump(2) << "\n";
  fs::remove_all(dir);
  fs::rename(tmp, dir);
}

PeftAdapter load_peft_adapter(const fs::path& dir) {
  const fs::path cfg_path = dir / "adapter_config.json";
  std::ifstream in(cfg_path);
  BRAID_USER_CHECK(in.good(),
                   "cannot read {}; expected a PEFT adapter directory (written by "
                   "braid train with lora.rank > 0)",
                   cfg_path.string());
  PeftAdapter a;
  try {
    a.config = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    user_error("{} is not valid JSON: {}", cfg_path.string(), e.what());
  }
  auto need = [&](const char* key) -> const nlohmann::json& {
    BRAID_USER_CHECK(a.config.contains(key), "{} has no '{}'", cfg_path.string(), key);
    return a.config.at(key);
  };
  BRAID_USER_CHECK(need("peft_type") == "LORA", "{}: peft_type is {}; expected \"LORA\"",
                   cfg_path.string(), need("peft_type").dump());
  const double r = need("r").get<double>(), alpha = need("lora_alpha").get<double>();
  BRAID_USER_CHECK(r > 0 && alpha > 0, "{}: r {} and lora_alpha {} must be > 0", cfg_path.string(),
                   r, alpha);
  const bool rs = a.config.value("use_rslora", false);
  a.scale = static_cast<float>(rs ? alpha / std::sqrt(r) : alpha / r);
  SafetensorsFile f = SafetensorsFile::open((dir / "adapter_model.safetensors").string());
  const std::string prefix = kPrefix;
  for (const std::string& n : f.names()) {
    BRAID_USER_CHECK(n.rfind(prefix, 0) == 0 && (n.ends_with(kA) || n.ends_with(kB)),
                     "{}: tensor {} is not a LoRA A/B weight named {}<module>.lora_A/B.weight",
                     f.path(), n, prefix);
    a.tensors.emplace_back(n.substr(prefix.size()), f.get(n).to(DType::F32));
  }
  BRAID_USER_CHECK(!a.tensors.empty(), "{} holds no tensors", f.path());
  return a;
}

void merge_peft_adapter(Transformer& model, const PeftAdapter& adapter) {
  auto find = [&](const std::string& name) -> const Tensor* {
    for (const auto& [n, t] : adapter.tensors)
      if (n == name) return &t;
    return nullptr;
  };
  int merged = 0;
  for (const auto& [name, a] : adapter.tensors) {
    if (!name.ends_with(kA)) continue;
    const std::string module = name.substr(0, name.size() - kA.size());
    const Tensor* b = find(module + kB);
    BRAID_USER_CHECK(b, "the adapter has {} but no {}{}", name, module, kB);
    Parameter* w = model.find_parameter(module + ".weight");
    BRAID_USER_CHECK(w, "the adapter names {}, which this {} model does not have", module,
                     model.config().family);
    const int64_t out = w->value.dim(0), in = w->value.dim(1), r = a.dim(0);
    BRAID_USER_CHECK(a.shape() == (Shape{r, in}) && b->shape() == (Shape{out, r}),
                     "{}: A {} and B {} do not fit the weight {}", module, shape_str(a.shape()),
                     shape_str(b->shape()), shape_str(w->value.shape()));
    // An offline fold, done once: loops on the host, each element accumulated in double by
    // one thread (the same bits on any thread count; a model on a device is folded in a host
    // copy and copied back).
    const bool on_host = w->value.device().is_cpu();
    Tensor host = on_host ? w->value : Tensor::empty(w->value.shape());
    if (!on_host) host.copy_from(w->value);
    float* wp = host.f32();
    const float* ap = a.f32();
    const float* bp = b->f32();
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i) {
        double s = 0;
        for (int64_t k = 0; k < r; ++k) s += static_cast<double>(bp[o * r + k]) * ap[k * in + i];
        wp[o * in + i] += static_cast<float>(adapter.scale * s);
      }
    if (!on_host) w->value.copy_from(host);
    ++merged;
  }
  BRAID_USER_CHECK(merged > 0, "the adapter holds no lora_A weights");
}

}  // namespace braid
