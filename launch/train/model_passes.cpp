// init_from, LoRA and activation-checkpointing passes for the trainer.
#include "launch/train/model_passes.h"

#include <cstdio>

#include "core/models/checkpointing.h"
#include "core/models/lora.h"
#include "core/random.h"

namespace braid {

RunConfig resolve_init_from(const RunConfig& cfg, std::unique_ptr<LoadedModel>& base) {
  if (cfg.lora.init_from.empty()) return cfg;
  base = std::make_unique<LoadedModel>(load_model(cfg.lora.init_from));
  RunConfig out = cfg;
  out.model = base->model->config();
  out.model.seed = cfg.model.seed;  // not part of the shape; seeds the init of what is new
  return out;
}

void copy_base_weights(Transformer& model, const RunConfig& cfg, const LoadedModel* base,
                       bool verbose) {
  if (!base) return;
  for (Parameter* q : model.parameters()) {  // a pipeline stage holds some of the base's
    const Parameter* p = base->model->find_parameter(q->name);
    BRAID_CHECK(p && q->value.shape() == p->value.shape(), "init_from: {} does not fit", q->name);
    q->value.copy_from(p->value);
  }
  if (verbose)
    std::printf("init_from: %s (%s, %.2fM params)\n", base->source.c_str(),
                cfg.model.family.c_str(), cfg.model.num_params() / 1e6);
}

void apply_training_passes(Transformer& model, const RunConfig& cfg, bool verbose) {
  if (cfg.lora.enabled()) {
    const int n = apply_lora(model, cfg.lora, cfg.model.seed);
    int64_t trainable = 0, total = 0;
    for (Parameter* p : model.parameters()) {
      total += p->value.numel();
      if (p->trainable) trainable += p->value.numel();
    }
    if (verbose)
      std::printf("lora: rank %d on %d linears; %lld trainable of %lld parameters (%.3f%%)\n",
                  cfg.lora.rank, n, static_cast<long long>(trainable),
                  static_cast<long long>(total),
                  100.0 * static_cast<double>(trainable) / static_cast<double>(total));
  }
  if (cfg.train.checkpointing != Checkpointing::None) {
    const int n =
        apply_checkpointing(model, cfg.train.checkpointing, cfg.train.checkpoint_every_n_layers);
    if (verbose)
      std::printf("activation checkpointing: %s (%d modules wrapped)\n",
                  std::string(enum_name(cfg.train.checkpointing)).c_str(), n);
  }
}

void apply_model_passes(Transformer& model, const RunConfig& cfg, const LoadedModel* base,
                        bool verbose) {
  copy_base_weights(model, cfg, base, verbose);
  apply_training_passes(model, cfg, verbose);
}

uint64_t micro_batch_dropout_seed(uint64_t seed, int64_t step, int micro) {
  const uint64_t s =
      hash_combine(hash_combine(seed ^ 0x6c6f7261ull, static_cast<uint64_t>(step)), micro);
  return s == 0 ? 1 : s;
}

}  // namespace braid
