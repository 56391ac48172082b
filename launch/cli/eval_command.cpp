// `braid eval MODEL --data FILE.bin`: mean loss of a model on a token file, printed as JSON.
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/input_guard.h"
#include "data/shard.h"
#include "launch/cli/commands.h"
#include "launch/config/config.h"
#include "launch/io/model_io.h"

namespace braid {

namespace {

// val.bin of the data directory the run was trained on (its saved config.yaml says which).
std::string default_val_split(const LoadedModel& lm, const std::string& given) {
  const std::filesystem::path cfg = std::filesystem::path(lm.run_dir) / "config.yaml";
  std::error_code ec;
  BRAID_USER_CHECK(!lm.run_dir.empty() && std::filesystem::is_regular_file(cfg, ec),
                   "no --data given and {} is not in a braid run directory with a config.yaml; "
                   "pass --data <val.bin>",
                   given);
  const RunConfig rc =
      parse_run_config(read_regular_file(cfg.string(), "run config"), cfg.string());
  BRAID_USER_CHECK(!rc.data.dir.empty(), "no --data given and {} sets no data.dir; pass --data",
                   cfg.string());
  return (std::filesystem::path(rc.data.dir) / "val.bin").string();
}

}  // namespace

void add_eval_command(CLI::App& app) {
  struct Opts {
    ModelOptions placement;
    std::string model, data;
    int seq_len = 0, batch = 8;
    int64_t max_tokens = 0;
    bool no_adapter = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* c = app.add_subcommand(
      "eval", "Loss of a checkpoint or safetensors model on a token file, printed as JSON");
  c->add_option("model", o->model,
                "A checkpoint directory, a run directory (its latest checkpoint), or an HF "
                "directory/model.safetensors with config.json beside it")
      ->required();
  c->add_option("--data", o->data,
                "Token shard written by `braid prepare` (default: val.bin of the run's data.dir)");
  c->add_option("--seq-len", o->seq_len, "Window length; 0 = the model's context length");
  c->add_option("--batch", o->batch, "Windows per forward pass")->check(CLI::Range(1, 1 << 30));
  c->add_option("--max-tokens", o->max_tokens,
                "Stop after this many predicted tokens (0: whole file)");
  c->add_flag("--no-adapter", o->no_adapter,
              "On a LoRA run: evaluate the base model alone (by default its adapters are applied)");
  add_model_options(c, o->placement);
  c->callback([o] {
    LoadedModel lm = load_model(o->model, o->placement, !o->no_adapter);
    Transformer& model = *lm.model;
    const ModelConfig& mc = model.config();
    if (o->data.empty()) o->data = default_val_split(lm, o->model);
    TokenShard shard(o->data);
    BRAID_USER_CHECK(shard.vocab_size() <= mc.vocab_size,
                     "{} has vocabulary {} but the model's vocab_size is {}", o->data,
                     shard.vocab_size(), mc.vocab_size);
    const int64_t T = o->seq_len > 0 ? o->seq_len : mc.context_length;
    BRAID_USER_CHECK(T <= mc.context_length, "--seq-len {} exceeds the model's context length {}",
                     T, mc.context_length);
    // Non-overlapping windows over the whole file: window w predicts tokens [wT+1, wT+T].
    const int64_t windows = (shard.size() - 1) / T;
    BRAID_USER_CHECK(windows > 0, "{} holds {} tokens, fewer than one window of {} + 1", o->data,
                     shard.size(), T);
    double sum = 0.0;
    int64_t count = 0;
    for (int64_t w0 = 0; w0 < windows; w0 += o->batch) {
      const int64_t nb = std::min<int64_t>(o->batch, windows - w0);
      Tensor tokens = Tensor::empty({nb, T}, DType::I32),
             targets = Tensor::empty({nb, T}, DType::I32);
      std::vector<int32_t> buf(static_cast<size_t>(T + 1));
      for (int64_t b = 0; b < nb; ++b) {
        shard.read((w0 + b) * T, T + 1, buf.data());
        std::copy(buf.begin(), buf.begin() + T, tokens.i32() + b * T);
        std::copy(buf.begin() + 1, buf.end(), targets.i32() + b * T);
      }
      LossSum l =
          model.forward_loss(*lm.ctx, lm.ctx->to_device(tokens), lm.ctx->to_device(targets));
      sum += l.sum;
      count += l.count;
      if (o->max_tokens > 0 && count >= o->max_tokens) break;
    }
    const double loss = sum / static_cast<double>(count);
    nlohmann::json j = {{"model", lm.source},
                        {"data", o->data},
                        {"step", lm.step},
                        {"tokens", count},
                        {"seq_len", T},
                        {"loss", loss},
                        {"perplexity", std::exp(loss)}};
    if (lm.adapter_modules > 0) {  // a LoRA run: say which weights were evaluated
      j["adapter"] = lm.adapter_applied;
      j["adapter_note"] = lm.adapter_note();
    }
    std::printf("%s\n", j.dump(2).c_str());
  });
}

}  // namespace braid
