// `braid merge-lora RUN_DIR --out DIR`: folds a run's LoRA adapters (RUN_DIR/adapter, PEFT
// layout) into its base weights and writes a plain HF model (safetensors weights, sharded above
// --max-shard-size, config.json, generation_config.json), loadable without PEFT. A QLoRA run
// (lora.base_quant) merges into its dequantised base (read from lora.init_from and quantised
// as training did, launch/io/model_io.h), so the merged model computes what training did.
// --dtype bf16 writes bf16 tensors (half the bytes), f32 by default.
#include <filesystem>
#include <fstream>
#include <memory>

#include "core/safetensors.h"
#include "data/tokenizer.h"
#include "launch/cli/commands.h"
#include "launch/io/hf_export.h"
#include "launch/io/hf_format.h"
#include "launch/io/lora_adapter.h"
#include "launch/io/model_io.h"

namespace braid {

namespace fs = std::filesystem;

void add_merge_lora_command(CLI::App& app) {
  struct Opts {
    std::string run, adapter, out, max_shard_size = kDefaultMaxShardSize, dtype = "f32";
    bool force = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* c = app.add_subcommand(
      "merge-lora", "Fold a run's LoRA adapters into the base weights and export a plain HF model");
  c->add_option("run_dir", o->run,
                "Run directory trained with lora.rank > 0 (its latest "
                "checkpoint holds the base)")
      ->required();
  c->add_option("--adapter", o->adapter, "PEFT adapter directory (default RUN_DIR/adapter)");
  c->add_option("--out", o->out, "Output directory")->required();
  c->add_option("--max-shard-size", o->max_shard_size,
                "Largest weight file; above it the weights are sharded with an index")
      ->capture_default_str();
  c->add_option("--dtype", o->dtype, "Element type of the exported weights: f32 or bf16")
      ->capture_default_str();
  c->add_flag("--force", o->force, "Replace a non-empty output directory");
  c->callback([o] {
    HfExport how;
    how.max_shard_bytes = parse_byte_size(o->max_shard_size, "--max-shard-size");
    BRAID_USER_CHECK(o->dtype == "f32" || o->dtype == "bf16",
                     "--dtype is '{}'; expected f32 or bf16", o->dtype);
    how.dtype = o->dtype == "bf16" ? DType::BF16 : DType::F32;
    const fs::path out = o->out;
    if (fs::exists(out) && !fs::is_empty(out) && !o->force)
      user_error("{} exists and is not empty; choose another --out or pass --force", o->out);
    const fs::path adapter_dir =
        o->adapter.empty() ? fs::path(o->run) / "adapter" : fs::path(o->adapter);
    const PeftAdapter adapter = load_peft_adapter(adapter_dir);
    LoadedModel lm = load_model(o->run);  // a plain model: only the base tensors are read
    merge_peft_adapter(*lm.model, adapter);
    const ModelConfig& cfg = lm.model->config();
    const fs::path tmp = out.string() + ".tmp-braid";
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    if (!lm.tokenizer.empty()) how.eos_token_id = Tokenizer::load(lm.tokenizer)->eot_id();
    write_hf_model(tmp, cfg, named_weights(*lm.model), how);
    if (!lm.tokenizer.empty()) fs::copy_file(lm.tokenizer, tmp / "tokenizer.json");
    if (fs::exists(out)) fs::remove_all(out);
    fs::rename(tmp, out);
    std::printf("merged %zu adapter tensors from %s into %s (%s) and exported to %s\n",
                adapter.tensors.size(), adapter_dir.string().c_str(), lm.source.c_str(),
                cfg.family.c_str(), o->out.c_str());
  });
}

}  // namespace braid
