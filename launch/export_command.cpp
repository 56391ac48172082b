// `braid export MODEL --out DIR` and `braid import HF_DIR --out RUN_DIR`: HF safetensors
// with config.json <-> braid checkpoints.
#include <filesystem>
#include <fstream>
#include <memory>

#include "launch/checkpoint.h"
#include "launch/commands.h"
#include "launch/config_json.h"
#include "launch/hf_format.h"
#include "launch/model_io.h"

namespace braid {

namespace fs = std::filesystem;

namespace {

void refuse_to_overwrite(const fs::path& out, bool force) {
  if (fs::exists(out) && !fs::is_empty(out) && !force)
    user_error("{} exists and is not empty; choose another --out or pass --force", out.string());
}

// Builds dir in a temporary sibling and renames it into place, so a failure leaves no
// half-written output and an existing directory is replaced only when the new one is whole.
template <class Fn>
void write_dir_atomically(const fs::path& out, Fn&& fill) {
  const fs::path tmp = out.string() + ".tmp-braid";
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  try {
    fill(tmp);
  } catch (...) {
    fs::remove_all(tmp);
    throw;
  }
  if (fs::exists(out)) fs::remove_all(out);
  fs::rename(tmp, out);
}

}  // namespace

void add_export_command(CLI::App& app) {
  struct Opts {
    std::string model, out, dtype = "f32";
    bool force = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* c = app.add_subcommand(
      "export", "Write HF-compatible model.safetensors + config.json (GPT-2 or Llama names)");
  c->add_option("model", o->model, "Checkpoint directory or run directory")->required();
  c->add_option("--out", o->out, "Output directory")->required();
  c->add_option("--dtype", o->dtype, "Tensor dtype in the file: f32, bf16 or f16")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}));
  c->add_flag("--force", o->force, "Replace a non-empty output directory");
  c->callback([o] {
    refuse_to_overwrite(o->out, o->force);
    LoadedModel lm = load_model(o->model);
    DType dt = DType::F32;
    parse_dtype(o->dtype, &dt);
    const ModelConfig& cfg = lm.model->config();
    auto hf = to_hf_tensors(cfg, named_weights(*lm.model));
    if (dt != DType::F32)
      for (auto& [name, t] : hf) t = t.to(dt);
    write_dir_atomically(o->out, [&](const fs::path& dir) {
      save_safetensors((dir / "model.safetensors").string(), hf, {{"format", "pt"}});
      nlohmann::json j = hf_config_json(cfg);
      j["torch_dtype"] = dt == DType::F32 ? "float32" : dt == DType::BF16 ? "bfloat16" : "float16";
      std::ofstream(dir / "config.json") << j.dump(2) << "\n";
      if (!lm.tokenizer.empty()) fs::copy_file(lm.tokenizer, dir / "tokenizer.json");
    });
    std::printf("exported %s (%s, %zu tensors, %s) to %s\n", lm.source.c_str(), cfg.family.c_str(),
                hf.size(), o->dtype.c_str(), o->out.c_str());
  });
}

void add_import_command(CLI::App& app) {
  struct Opts {
    std::string hf, out;
    bool force = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* c = app.add_subcommand(
      "import", "Turn an HF GPT-2/Llama directory (config.json + model.safetensors) into a braid "
                "run directory with a step-0 checkpoint");
  c->add_option("hf_dir", o->hf, "Directory with config.json and model.safetensors")->required();
  c->add_option("--out", o->out, "Run directory to create (use it with eval, generate, export, "
                "or as checkpoint.resume=<out>/checkpoints/step-00000000 to fine-tune)")->required();
  c->add_flag("--force", o->force, "Replace a non-empty output directory");
  c->callback([o] {
    refuse_to_overwrite(o->out, o->force);
    BRAID_USER_CHECK(fs::exists(fs::path(o->hf) / "config.json"),
                     "{} has no config.json; expected an HF model directory", o->hf);
    LoadedModel lm = load_model(o->hf);
    const ModelConfig& cfg = lm.model->config();
    std::string where;
    write_dir_atomically(o->out, [&](const fs::path& dir) {
      CheckpointManager mgr(dir.string(), 1);
      nlohmann::json state = {{"model", fields_to_json(cfg)},
                              {"optimizer_steps", 0},
                              {"imported_from", fs::absolute(o->hf).string()}};
      mgr.save(0, named_weights(*lm.model), {}, state);
      if (!lm.tokenizer.empty()) fs::copy_file(lm.tokenizer, dir / "tokenizer.json");
    });
    std::printf("imported %s (%s, %.2fM parameters) into %s\n", o->hf.c_str(), cfg.family.c_str(),
                cfg.num_params() / 1e6, o->out.c_str());
  });
}

}  // namespace braid
