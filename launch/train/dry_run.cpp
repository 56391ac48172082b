// One measured step against the planner's memory formulas (launch/plan/memory_model.h).
#include "launch/train/dry_run.h"

#include <cstdio>

#include "data/loader.h"
#include "data/shard.h"
#include "launch/plan/config_input.h"
#include "launch/plan/memory_model.h"
#include "launch/plan/model_math.h"
#include "launch/train/exec_setup.h"
#include "launch/train/model_passes.h"
#include "optim/adamw.h"

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

plan::MemoryBreakdown planned(const RunConfig& cfg) {
  plan::ConfigPlanInput in = plan::plan_input_from_run_config(cfg);
  in.train.checkpointing = cfg.train.checkpointing;
  in.train.lora_rank = cfg.lora.rank;
  in.train.lora_targets = planner_targets(cfg.lora.effective_targets(cfg.model.is_llama()));
  plan::GpuSpec rank;  // one CPU process: no runtime context to add
  rank.overhead_gib = 0;
  plan::MemoryBreakdown mem = plan::stage_memory(in.model, in.train, plan::Layout{}, rank, 0);
  if (cfg.lora.enabled()) {
    // braid keeps the frozen base in f32; the planner's LoRA formula assumes a 16-bit or
    // quantised base, so the weights are counted here: every parameter plus the adapters.
    const double adapters = static_cast<double>(in.model.n_layer) *
                            static_cast<double>(plan::lora_params_per_block(in.model, cfg.lora.rank,
                                                                            in.train.lora_targets));
    mem.weights = 4.0 * (in.model.num_params() + adapters);
  }
  return mem;
}

}  // namespace

void dry_run(const RunConfig& cfg_in) {
  std::unique_ptr<LoadedModel> base;
  const RunConfig cfg = resolve_init_from(cfg_in, base);
  const std::string train_path = cfg.data.dir + "/train.bin";
  {
    const TokenShard shard(train_path);
    check_shard_vocab(shard, cfg.model.vocab_size);
  }
  // The device the run would use: on a GPU the measured column is the device allocator's.
  const DeviceDecision device = choose_device(cfg.train.device, "train.device",
                                  cfg.lora.enabled() && cfg.lora.base_quant != BaseQuant::None);
  std::unique_ptr<ExecContext> ctx_owner =
      make_context(device.device, cfg.data.seed, cfg.train.tf32);
  ExecContext& ctx = *ctx_owner;
  Transformer model(ctx, cfg.model);
  model.init_weights();
  apply_model_passes(model, cfg, base.get());
  base.reset();
  AdamW opt(ctx, model.parameters(), cfg.optim);
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
  clip_grad_norm(ctx, model.parameters(), global_grad_norm(ctx, model.parameters()),
                 cfg.optim.grad_clip);
  opt.step(lr_at(cfg.optim, 0, cfg.train.steps));
  const MemoryStats got = ctx.allocator().stats();
  const plan::MemoryBreakdown plan = planned(cfg);

  auto measured = [&](MemCategory c) { return got.peak_bytes[static_cast<int>(c)] / kMiB; };
  std::printf(
      "braid train --dry-run: memory of one rank (MiB), planner formulas "
      "(launch/plan/memory_model) vs one measured step (allocator peaks)\n");
  std::printf("  device %s\n", device.reason.c_str());
  std::printf("  %s %s, micro-batch %d x %d, accum %d, checkpointing %s, lora rank %d\n",
              cfg.model.family.c_str(),
              cfg.lora.init_from.empty() ? "" : cfg.lora.init_from.c_str(), cfg.data.micro_batch,
              cfg.data.seq_len, cfg.data.grad_accum,
              std::string(enum_name(cfg.train.checkpointing)).c_str(), cfg.lora.rank);
  std::printf("  %-16s %12s %12s\n", "category", "planned", "measured");
  auto row = [&](const char* name, double plan_bytes, double meas_mib) {
    if (plan_bytes < 0)
      std::printf("  %-16s %12s %12.2f\n", name, "-", meas_mib);
    else
      std::printf("  %-16s %12.2f %12.2f\n", name, plan_bytes / kMiB, meas_mib);
  };
  row("weights", plan.weights, measured(MemCategory::Weights));
  row("grads", plan.grads, measured(MemCategory::Grads));
  row("optimizer", plan.optimizer, measured(MemCategory::OptimizerState));
  row("activations", plan.activations, measured(MemCategory::Activations));
  row("communication", plan.comm, measured(MemCategory::Communication));
  row("workspace", -1, measured(MemCategory::Workspace));
  row("total", plan.total(), got.peak_total / kMiB);
  std::printf(
      "  (measured total: the peak of all categories together; the planner's activations "
      "count the stash at its peak, the allocator also every temporary)\n"
      "nothing was written (dry run)\n");
}

}  // namespace braid
