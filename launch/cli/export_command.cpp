// `braid export MODEL --out DIR` and `braid import HF_DIR --out RUN_DIR`: HF safetensors
// with config.json <-> braid checkpoints.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "data/file_util.h"
#include "data/hf_bpe.h"
#include "data/hf_tokenizer.h"
#include "data/tokenizer.h"
#include "launch/cli/commands.h"
#include "launch/config/config.h"
#include "launch/config/config_json.h"
#include "launch/io/checkpoint.h"
#include "launch/io/hf_export.h"
#include "launch/io/hf_format.h"
#include "launch/io/model_io.h"

namespace braid {

namespace fs = std::filesystem;

namespace {

// "hf/new/" and "hf/new/." name the directory hf/new: the temporary and backup siblings must
// sit beside it, not inside it.
fs::path normalized_out(const std::string& out) {
  fs::path p = fs::path(out).lexically_normal();
  if (p.has_filename() == false && p.has_parent_path()) p = p.parent_path();
  BRAID_USER_CHECK(!p.empty() && p != "." && p != ".." && p.filename() != "..",
                   "--out '{}' names no new directory; give a path such as hf/mymodel", out);
  return p;
}

// --force must never delete what is being read: the output cannot hold the source.
void refuse_source_inside(const fs::path& out, const std::string& source) {
  std::error_code ec;
  const fs::path o = fs::weakly_canonical(out, ec), src = fs::weakly_canonical(source, ec);
  const auto rel = src.lexically_relative(o);
  if (!rel.empty() && *rel.begin() != "..")
    user_error("--out {} contains the model being read ({}); choose another --out", out.string(),
               source);
}

void write_json(const fs::path& p, const nlohmann::json& j) {
  write_file_atomic(p.string(), j.dump(2) + "\n");
}

void refuse_to_overwrite(const fs::path& out, bool force) {
  std::error_code ec;
  if (fs::exists(out, ec) && !fs::is_directory(out, ec))
    user_error("--out {} exists and is not a directory", out.string());
  if (fs::exists(out, ec) && !fs::is_empty(out, ec) && !force)
    user_error("{} exists and is not empty; choose another --out or pass --force", out.string());
}

// Builds dir in a temporary sibling, then swaps it in: the old directory is renamed aside and
// deleted only after the new one is in place, so a failure at any point leaves either the old
// output or the new one whole, never neither.
template <class Fn>
void write_dir_atomically(const fs::path& out, Fn&& fill) {
  const fs::path tmp = out.string() + ".tmp-braid";
  const fs::path old = out.string() + ".old-braid";
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  try {
    fill(tmp);
  } catch (...) {
    fs::remove_all(tmp);
    throw;
  }
  const bool replacing = fs::exists(out);
  if (replacing) {
    fs::remove_all(old);
    fs::rename(out, old);
  }
  try {
    fs::rename(tmp, out);
  } catch (...) {
    if (replacing) fs::rename(old, out);
    throw;
  }
  if (replacing) fs::remove_all(old);
}

}  // namespace

void add_export_command(CLI::App& app) {
  struct Opts {
    std::string model, out, dtype = "f32", max_shard_size = kDefaultMaxShardSize;
    bool force = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* c = app.add_subcommand(
      "export",
      "Write an HF model directory: safetensors weights (sharded above --max-shard-size), "
      "config.json, generation_config.json and the tokenizer");
  c->add_option("model", o->model, "Checkpoint directory or run directory")->required();
  c->add_option("--out", o->out, "Output directory")->required();
  c->add_option("--dtype", o->dtype, "Tensor dtype in the file: f32, bf16 or f16")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}));
  c->add_option("--max-shard-size", o->max_shard_size,
                "Largest weight file: above it the weights are split into "
                "model-0000N-of-0000M.safetensors with model.safetensors.index.json, as "
                "transformers writes them (5GB, 500MB, 2GiB, or bytes)")
      ->capture_default_str();
  c->add_flag("--force", o->force, "Replace a non-empty output directory");
  c->callback([o] {
    HfExport how;
    how.max_shard_bytes = parse_byte_size(o->max_shard_size, "--max-shard-size");
    const fs::path out = normalized_out(o->out);
    refuse_to_overwrite(out, o->force);
    refuse_source_inside(out, o->model);
    LoadedModel lm = load_model(o->model);
    parse_dtype(o->dtype, &how.dtype);
    const ModelConfig& cfg = lm.model->config();
    std::unique_ptr<Tokenizer> tok;
    if (!lm.tokenizer.empty()) tok = load_tokenizer_path(lm.tokenizer);
    if (tok) how.eos_token_id = tok->eot_id();
    std::string tok_warning;
    std::vector<std::string> files;
    write_dir_atomically(out, [&](const fs::path& dir) {
      files = write_hf_model(dir, cfg, named_weights(*lm.model), how);
      if (!tok) return;
      tok->save((dir / kTokenizerFile).string());
      write_json(dir / "tokenizer.json", hf_tokenizer_json(*tok, &tok_warning));
      write_json(dir / "tokenizer_config.json", hf_tokenizer_config_json(*tok, cfg.context_length));
    });
    if (!tok)
      std::fprintf(stderr, "warning: no tokenizer found near %s; the export has none\n",
                   lm.source.c_str());
    if (!tok_warning.empty())
      std::fprintf(stderr, "warning: tokenizer.json: %s\n", tok_warning.c_str());
    const size_t shards = files.size() == 1 ? 1 : files.size() - 1;  // the index is not a shard
    std::printf("exported %s (%s, %s, %zu weight file%s) to %s\n", lm.source.c_str(),
                std::string(hf_config_json(cfg)["model_type"]).c_str(), o->dtype.c_str(), shards,
                shards == 1 ? "" : "s", out.c_str());
  });
}

void add_import_command(CLI::App& app) {
  struct Opts {
    std::string hf, out;
    bool force = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* c = app.add_subcommand(
      "import",
      "Turn an HF directory (config.json and model.safetensors or its shards; GPT-2, "
      "Llama, Mistral, Qwen2) into a braid run directory with a step-0 checkpoint");
  c->add_option("hf_dir", o->hf,
                "Directory with config.json and model.safetensors (or model.safetensors.index.json "
                "and its shards)")
      ->required();
  c->add_option("--out", o->out,
                "Run directory to create (use it with eval, generate, export, "
                "or run.init_from=<out> to fine-tune; it holds a config.yaml for that)")
      ->required();
  c->add_flag("--force", o->force, "Replace a non-empty output directory");
  c->callback([o] {
    const fs::path out = normalized_out(o->out);
    refuse_to_overwrite(out, o->force);
    BRAID_USER_CHECK(fs::exists(fs::path(o->hf) / "config.json"),
                     "{} has no config.json; expected an HF model directory", o->hf);
    refuse_source_inside(out, o->hf);
    LoadedModel lm = load_model(o->hf);
    const ModelConfig& cfg = lm.model->config();
    std::unique_ptr<Tokenizer> tok;
    try {
      if (!lm.tokenizer.empty()) tok = load_tokenizer_path(lm.tokenizer);  // HF or braid format
    } catch (const UserError& e) {
      std::fprintf(stderr, "warning: importing without a tokenizer: %s\n", e.what());
    }
    const fs::path final_dir = fs::absolute(out);
    write_dir_atomically(out, [&](const fs::path& dir) {
      CheckpointManager mgr(dir.string(), 1);
      nlohmann::json state = {{"model", fields_to_json(cfg)},
                              {"optimizer_steps", 0},
                              {"imported_from", fs::absolute(o->hf).string()}};
      mgr.save(0, named_weights(*lm.model), {}, state);
      if (tok) tok->save((dir / kTokenizerFile).string());
      // A config to fine-tune from: the model shape comes from init_from; data.dir is the
      // user's (prepared with this tokenizer).
      RunConfig rc;
      rc.run.name = final_dir.filename().string() + "-finetune";
      rc.run.dir = final_dir.parent_path().string();
      rc.run.init_from = final_dir.string();
      rc.model = cfg;
      rc.data.seq_len = std::min(rc.data.seq_len, cfg.context_length);
      save_run_config(rc, dir / "config.yaml");
    });
    std::printf(
        "imported %s (%s, %.2fM parameters%s) into %s\n"
        "fine-tune with: braid train %s --set data.dir=<prepared data>\n",
        o->hf.c_str(), cfg.family.c_str(), cfg.num_params() / 1e6,
        tok ? ", tokenizer" : ", no tokenizer", out.c_str(), (out / "config.yaml").c_str());
  });
}

}  // namespace braid
