// One measured step against the planner's memory formulas (launch/plan/memory_model.h).
#include "launch/train/dry_run.h"

#include <cstdio>

#include "core/models/lora.h"
#include "data/loader.h"
#include "data/shard.h"
#include "launch/plan/config_input.h"
#include "launch/plan/memory_model.h"
#include "launch/plan/model_math.h"
#include "launch/train/exec_setup.h"
#include "launch/train/model_passes.h"
#include "optim/adamw.h"
#include "optim/mixed_precision.h"

namespace braid {

namespace {

constexpr double kMiB = 1048576.0;

// braid's LoRA target names in the planner's vocabulary (q, k, v, o, gate, up, down, all).
std::vector<std::string> planner_targets(const std::vector<std::string>& targets) {
  std::vector<std::string> out;
  for (std::string t : targets) {
    if (t.ends_with("_proj") && t != "c_proj") t.resize(t.size() - 5);  // q_proj -> q
    if (t == "all-linear") return {"all"};
    if (t == "c_attn") {
      out.insert(out.end(), {"q", "k", "v"});
    } else if (t == "c_proj") {
      out.insert(out.end(), {"o", "down"});
    } else if (t == "c_fc") {
      out.push_back("up");
    } else {
      out.push_back(t);
    }
  }
  return out;
}

// The planner's categories for this run. LoRA's weights are split the way braid holds them:
// the targeted linears' base (quantised with lora.base_quant, else in the compute dtype), every
// other frozen parameter in the compute dtype, the adapters; masters and moments apart.
struct Planned {
  plan::MemoryBreakdown mem;
  double base_codes = 0, base_constants = 0, frozen = 0, adapters = 0;
  double masters = 0, moments = 0;
};

Planned planned(const RunConfig& cfg) {
  plan::ConfigPlanInput in = plan::plan_input_from_run_config(cfg);
  in.train.checkpointing = cfg.train.checkpointing;
  // The compute dtype the run uses (activations, frozen weights); gradients of the trainable
  // parameters stay f32 (their masters' dtype).
  in.train.precision = cfg.train.precision;
  in.train.lora_rank = cfg.lora.rank;
  in.train.lora_targets = planner_targets(cfg.lora.effective_targets(cfg.model.is_llama()));
  plan::GpuSpec rank;  // one CPU process: no runtime context to add
  rank.overhead_gib = 0;
  Planned p;
  p.mem = plan::stage_memory(in.model, in.train, plan::Layout{}, rank, 0);
  const double e = precision_bytes(cfg.train.precision);
  const double all = static_cast<double>(in.model.num_params());
  double trainable = all;
  if (cfg.lora.enabled()) {
    const double layers = in.model.n_layer;
    trainable = layers * static_cast<double>(plan::lora_params_per_block(in.model, cfg.lora.rank,
                                                                         in.train.lora_targets));
    const double base = layers * static_cast<double>(plan::lora_base_params_per_block(
                                     in.model, in.train.lora_targets));
    p.adapters = trainable * e;
    if (cfg.lora.base_quant != BaseQuant::None) {
      const plan::QuantBytesPerWeight q =
          plan::quant_bytes_per_weight(std::string(enum_name(cfg.lora.base_quant)),
                                       cfg.lora.quant_block_size, cfg.lora.double_quant);
      p.base_codes = base * q.codes;
      p.base_constants = base * q.constants;
      p.frozen = (all - base) * e;
    } else {
      p.frozen = all * e;
    }
    p.mem.weights = p.base_codes + p.base_constants + p.frozen + p.adapters;
  }
  p.masters = cfg.train.precision == Precision::FP32 ? 0.0 : 4.0 * trainable;
  p.moments = trainable * plan::optimizer_state_bytes(cfg.optim.name);
  if (cfg.lora.enabled() && cfg.optim.name == "adamw8bit") {
    // Adapters under kAdam8bitMinNumel elements keep f32 moments (8 bytes an element).
    p.moments = 0;
    const int64_t r = cfg.lora.rank;
    for (const auto& [in_f, out_f] : plan::targeted_projections(in.model, in.train.lora_targets))
      for (const int64_t n : {r * in_f, r * out_f})
        p.moments += static_cast<double>(in.model.n_layer) * static_cast<double>(n) *
                     (n < kAdam8bitMinNumel ? 8.0 : plan::optimizer_state_bytes(cfg.optim.name));
  }
  p.mem.optimizer = p.moments;  // the masters have their own row
  return p;
}

// Bytes the model holds now, split as Planned splits them.
struct Held {
  QuantizedBaseBytes base;
  double frozen = 0, adapters = 0;
};

Held held(Transformer& model) {
  Held h;
  h.base = quantized_base_bytes(model);
  for (Parameter* p : model.parameters())
    (p->trainable ? h.adapters : h.frozen) += static_cast<double>(p->value.nbytes());
  return h;
}

std::unique_ptr<Optimizer> dry_run_optimizer(ExecContext& ctx, const RunConfig& cfg,
                                             const std::vector<Parameter*>& params) {
  // As make_optimizer builds it for one rank (launch/train/train_optimizer.h).
  const DType dt = precision_dtype(cfg.train.precision);
  if (dt == DType::F32) return std::make_unique<AdamW>(ctx, params, cfg.optim);
  return std::make_unique<MixedPrecision>(
      ctx, params, dt, cfg.train.loss_scale,
      [&](std::vector<Parameter*> masters) -> std::unique_ptr<Optimizer> {
        return std::make_unique<AdamW>(ctx, std::move(masters), cfg.optim);
      });
}

}  // namespace

void dry_run(const RunConfig& cfg_in) {
  const RunConfig cfg = resolve_init_from(cfg_in);
  const std::string train_path = cfg.data.dir + "/train.bin";
  {
    const TokenShard shard(train_path);
    check_shard_vocab(shard, cfg.model.vocab_size);
  }
  // The device the run would use: on a GPU the measured column is the device allocator's.
  const DeviceDecision device =
      choose_device(cfg.train.device, "train.device",
                    cfg.lora.enabled() && cfg.lora.base_quant != BaseQuant::None);
  std::unique_ptr<ExecContext> ctx_owner =
      make_context(device.device, cfg.data.seed, cfg.train.tf32, cfg.train.deterministic);
  ExecContext& ctx = *ctx_owner;
  // As the trainer builds it (launch/train/rank_model.cpp): the quantised base replaces the
  // full-precision one before the optimizer converts the rest to the compute dtype.
  const std::unique_ptr<Transformer> model_owner = build_model(ctx, cfg, BlockRange{}, "", {}, 0);
  Transformer& model = *model_owner;
  std::unique_ptr<Optimizer> opt = dry_run_optimizer(ctx, cfg, model.parameters());
  const Held now = held(model);
  Loader loader(train_path, cfg.data, 0, 1, 0);
  const float grad_scale = 1.0f / (static_cast<float>(cfg.data.micro_batch) *
                                   static_cast<float>(cfg.data.seq_len * cfg.data.grad_accum));
  ctx.allocator().reset_peaks();
  // One optimizer step as the trainer runs it (the optimizer state is allocated here).
  model.zero_grad(ctx);
  for (int m = 0; m < cfg.data.grad_accum; ++m) {
    Batch b = loader.next();
    MicroBatch mb(ctx);
    mb.dropout_seed = micro_batch_dropout_seed(cfg.data.seed, 0, m);
    model.forward_backward(mb, ctx.to_device(b.tokens), ctx.to_device(b.targets), grad_scale);
  }
  opt->clip(opt->grad_norm(), cfg.optim.grad_clip);
  opt->step(lr_at(cfg.optim, 0, cfg.train.steps));
  const MemoryStats got = ctx.allocator().stats();
  const Planned pl = planned(cfg);
  const plan::MemoryBreakdown& plan = pl.mem;

  auto measured = [&](MemCategory c) { return got.peak_bytes[static_cast<int>(c)] / kMiB; };
  std::printf(
      "braid train --dry-run: memory of one rank (MiB), planner formulas "
      "(launch/plan/memory_model) vs one measured step (allocator peaks)\n");
  std::printf("  device %s\n", device.reason.c_str());
  std::printf(
      "  %s %s, %.2fM params, micro-batch %d x %d, accum %d, precision %s, checkpointing %s, "
      "lora rank %d, base %s, optimizer %s\n",
      cfg.model.family.c_str(), cfg.lora.init_from.empty() ? "" : cfg.lora.init_from.c_str(),
      cfg.model.num_params() / 1e6, cfg.data.micro_batch, cfg.data.seq_len, cfg.data.grad_accum,
      std::string(enum_name(cfg.train.precision)).c_str(),
      std::string(enum_name(cfg.train.checkpointing)).c_str(), cfg.lora.rank,
      cfg.lora.enabled() ? std::string(enum_name(cfg.lora.base_quant)).c_str() : "-",
      cfg.optim.name.c_str());
  std::printf("  %-16s %12s %12s\n", "category", "planned", "measured");
  auto row = [&](const char* name, double plan_bytes, double meas_mib) {
    if (plan_bytes < 0)
      std::printf("  %-16s %12s %12.3f\n", name, "-", meas_mib);
    else
      std::printf("  %-16s %12.3f %12.3f\n", name, plan_bytes / kMiB, meas_mib);
  };
  row("weights", plan.weights, measured(MemCategory::Weights));
  if (cfg.lora.enabled()) {  // what the weights hold (measured: the tensors themselves)
    if (cfg.lora.base_quant != BaseQuant::None) {
      row(" base codes", pl.base_codes, static_cast<double>(now.base.codes) / kMiB);
      row(" base constants", pl.base_constants, static_cast<double>(now.base.constants) / kMiB);
    }
    row(" other frozen", pl.frozen, now.frozen / kMiB);
    row(" adapters", pl.adapters, now.adapters / kMiB);
  }
  row("master weights", pl.masters, measured(MemCategory::MasterWeights));
  row("grads", plan.grads, measured(MemCategory::Grads));
  row("optimizer", plan.optimizer, measured(MemCategory::OptimizerState));
  row("activations", plan.activations, measured(MemCategory::Activations));
  row("communication", plan.comm, measured(MemCategory::Communication));
  row("workspace", -1, measured(MemCategory::Workspace));
  row("total", plan.total() + pl.masters, got.peak_total / kMiB);
  if (now.base.linears > 0)
    std::printf("  quantised base: %d linears, %lld weights, %.4f bytes per weight\n",
                now.base.linears, static_cast<long long>(now.base.weights),
                static_cast<double>(now.base.codes + now.base.constants) /
                    static_cast<double>(now.base.weights));
  std::printf(
      "  (measured total: the peak of all categories together; the planner's activations "
      "count the stash at its peak, the allocator also every temporary)\n"
      "nothing was written (dry run)\n");
}

}  // namespace braid
