// init_from, LoRA and activation-checkpointing passes for the trainer.
#include "launch/train/model_passes.h"

#include <cstdio>
#include <map>
#include <optional>

#include "core/models/checkpointing.h"
#include "core/models/lora.h"
#include "core/random.h"
#include "launch/io/checkpoint_tensors.h"

namespace braid {

RunConfig resolve_init_from(const RunConfig& cfg) {
  if (cfg.lora.init_from.empty()) return cfg;
  RunConfig out = cfg;
  out.model = model_config_at(cfg.lora.init_from);
  out.model.seed = cfg.model.seed;  // not part of the shape; seeds the init of what is new
  return out;
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

namespace {

// Reads lora.init_from into `model` (built under DeferredWeights and placed): see build_model.
void read_base(ExecContext& ctx, Transformer& model, const RunConfig& cfg, int tp_rank) {
  const LoraConfig& lora = cfg.lora;
  std::map<std::string, Parameter*> deferred;
  WantedTensors wanted;
  for (Parameter* p : model.parameters())
    if (p->value.is_meta()) {
      deferred.emplace(p->name, p);
      wanted.emplace(p->name, whole_shape_of(*p));
    }
  // The LoRA-wrapped linear each base tensor belongs to, quantised once all of its are read.
  std::map<std::string, LoraLinear*> owner;
  if (lora.base_quant != BaseQuant::None)
    model.visit([&](Module& m) {
      if (auto* l = dynamic_cast<LoraLinear*>(&m)) {
        std::vector<Parameter*> ps;
        l->base().own_parameters(ps);
        for (Parameter* p : ps) owner.emplace(p->name, l);
      }
    });
  // A 16-bit run keeps its frozen, unquantised base weights in the compute dtype only: they are
  // converted on the host as they are read, so the device never holds the base in f32 (twice
  // its size; MasterWeights takes them as they are).
  const DType compute = precision_dtype(cfg.train.precision);
  stream_model_weights(lora.init_from, wanted, [&](const std::string& name, const Tensor& whole) {
    Parameter* p = deferred.at(name);
    const auto o = owner.find(name);
    const Tensor part = local_part_of(whole, *p, tp_rank);
    const bool narrow = compute != DType::F32 && !p->trainable && o == owner.end();
    const Tensor stored = narrow ? part.to(compute, MemCategory::Other) : part;
    p->value = ctx.empty(part.shape(), stored.dtype(), MemCategory::Weights);
    p->value.copy_from(stored);
    if (o == owner.end()) return;
    std::vector<Parameter*> ps;
    o->second->base().own_parameters(ps);
    for (Parameter* q : ps)
      if (q->value.is_meta()) return;  // its bias (or weight) is still to come
    o->second->quantize_base(ctx, lora.base_quant, lora.quant_block_size, lora.double_quant);
  });
  model.refresh_parameters();
  for (Parameter* p : model.parameters())
    BRAID_USER_CHECK(!p->value.is_meta(), "lora.init_from {}: tensor {} was not read",
                     lora.init_from, p->name);
}

// Initialises the parameters of `model` (built under DeferredWeights and placed) as
// init_weights would have before the split: each whole tensor in turn on the host, then only
// this rank's part kept on ctx. A tensor-parallel rank never holds the whole model.
void init_parts(ExecContext& ctx, Transformer& model, int tp_rank) {
  for (Parameter* p : model.parameters()) {
    if (!p->value.is_meta()) continue;
    Tensor whole = Tensor::empty(whole_shape_of(*p), DType::F32);
    model.init_parameter(p->name, whole);
    const Tensor part = local_part_of(whole, *p, tp_rank);
    p->value = ctx.empty(part.shape(), DType::F32, MemCategory::Weights);
    p->value.copy_from(part);
  }
  model.refresh_parameters();
}

}  // namespace

std::unique_ptr<Transformer> build_model(ExecContext& ctx, const RunConfig& cfg, BlockRange range,
                                         const std::string& init_from,
                                         const std::function<void(Transformer&)>& place,
                                         int tp_rank, bool verbose) {
  const bool from_base = !cfg.lora.init_from.empty();
  // A seeded init split over tensor-parallel ranks: each rank makes only its parts.
  const bool init_parts_only = !from_base && init_from.empty() && place;
  std::unique_ptr<Transformer> t;
  {
    std::optional<DeferredWeights> deferred;
    if (from_base || init_parts_only) deferred.emplace();
    t = std::make_unique<Transformer>(ctx, cfg.model, range);
  }
  if (!from_base && !init_parts_only) {
    t->init_weights();
    if (!init_from.empty()) init_weights_from(*t, init_from);  // whole, before the split
  }
  apply_training_passes(*t, cfg, verbose);
  if (place) place(*t);
  if (init_parts_only) init_parts(ctx, *t, tp_rank);
  if (from_base) {
    read_base(ctx, *t, cfg, tp_rank);
    if (verbose)
      std::printf("init_from: %s (%s, %.2fM params)\n", cfg.lora.init_from.c_str(),
                  cfg.model.family.c_str(), cfg.model.num_params() / 1e6);
  } else if (cfg.lora.enabled()) {
    quantize_lora_bases(ctx, *t, cfg.lora);
  }
  return t;
}

uint64_t micro_batch_dropout_seed(uint64_t seed, int64_t step, int micro) {
  const uint64_t s =
      hash_combine(hash_combine(seed ^ 0x6c6f7261ull, static_cast<uint64_t>(step)), micro);
  return s == 0 ? 1 : s;
}

}  // namespace braid
