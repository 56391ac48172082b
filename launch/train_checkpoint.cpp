// The trainer's checkpoints: manifest state, per-layout writers, LoRA adapter files.
#include "launch/train_checkpoint.h"

#include "core/models/lora.h"
#include "launch/checkpoint_tensors.h"
#include "launch/config.h"
#include "launch/config_json.h"
#include "launch/lora_adapter.h"
#include "launch/model_io.h"
#include "parallel/scalar_reduce.h"

namespace braid {

namespace fs = std::filesystem;

// The manifest's `state`: everything besides the tensors that a resume needs.
nlohmann::json checkpoint_state(const RunConfig& cfg, int64_t done, const Optimizer& opt,
                                const ParallelLayout& layout) {
  nlohmann::json j = {
      {"model", fields_to_json(cfg.model)},
      // The layout that wrote it. Tensors are read back whole whatever it was
      // (launch/checkpoint_tensors.h), and ZeRO-1 writes whole per-parameter moments, so any
      // (dp, tp, pp), with or without ZeRO-1, can load it.
      {"layout", {{"dp", layout.dp}, {"tp", layout.tp}, {"pp", layout.pp}, {"zero", layout.zero}}},
      {"optimizer_steps", opt.steps_taken()},
      {"data", {{"seed", cfg.data.seed}, {"next_step", done}}},
      // Training draws randomness only from counter-based streams (data windows from
      // (seed, step, micro), init from (seed, name)), so the seeds and the step are the
      // whole RNG state.
      {"rng",
       {{"kind", "counter"},
        {"data_seed", cfg.data.seed},
        {"init_seed", cfg.model.seed},
        {"counter", done}}},
      {"config_yaml", dump_run_config(cfg)}};
  if (opt.scales_loss()) j["loss_scaler"] = opt.loss_scaler_state();
  return j;
}

namespace {
// The f32 weights a checkpoint saves: the optimizer's masters, or the model's own values.
NamedTensors checkpoint_weights(Optimizer& opt, const RankModel& model, bool writer) {
  std::optional<NamedTensors> masters = opt.checkpoint_masters(writer);  // collective if sharded
  if (masters) return std::move(*masters);
  return writer ? named_weights(model.parameters()) : NamedTensors{};
}
}  // namespace

std::string write_checkpoint(CheckpointManager& ckpt, int64_t step, const RankModel& model,
                             Optimizer& opt, const nlohmann::json& manifest_state,
                             Communicator& world, bool lead, int dp_rank) {
  const std::string dir = (fs::path(ckpt.dir()) / CheckpointManager::dir_name(step)).string();
  const bool whole_model = model.tp_size() == 1 && model.stages() == 1;
  if (whole_model && !opt.sharded()) {  // rank 0 alone
    if (!lead) return dir;
    return ckpt.save(step, checkpoint_weights(opt, model, true), opt.state_tensors(nullptr),
                     manifest_state);
  }
  std::vector<CheckpointFile> files;
  if (opt.sharded()) {
    // The weights of each (tp, pp) shard from its DP rank 0 (gathered over DP: 16 bits,
    // collective); every rank's own moments, as flat pieces of its local tensors (with the
    // tensor-parallel record of a split parameter; replicated ones from tp rank 0 only).
    const bool writer = dp_rank == 0;
    const NamedTensors weights = checkpoint_weights(opt, model, writer);
    if (writer) files.push_back(std::move(model.checkpoint_files(weights, {})[0]));
    const int tp_rank = model.tp_rank();
    CheckpointFile file{whole_model ? fmt::format("optimizer-dp{}.safetensors", dp_rank)
                                    : fmt::format("optimizer-tp{}-pp{}-dp{}.safetensors", tp_rank,
                                                  model.stage(), dp_rank),
                        {},
                        nlohmann::json::object()};
    nlohmann::json pieces;
    for (auto& [name, t] : opt.state_tensors(&pieces)) {
      const Parameter* p = model.owner(name);
      BRAID_CHECK(p, "optimizer state {} belongs to no parameter of this rank", name);
      if (p->replica) continue;  // the tied head's copy: the first stage saves the original
      nlohmann::json rec = pieces.at(name);
      if (p->shard.sharded()) {
        if (tp_rank % p->shard.replicas != 0) continue;  // a shared part: its first holder
        rec["tp"] = shard_record(*p, tp_rank);
      } else if (tp_rank != 0) {
        continue;  // replicated: written once, by tensor-parallel rank 0
      }
      file.shards[name] = std::move(rec);
      file.tensors.emplace_back(name, t);
    }
    files.push_back(std::move(file));
  } else if (dp_rank == 0) {
    files = model.checkpoint_files(checkpoint_weights(opt, model, true), opt.state_tensors(nullptr));
  }
  if (lead) ckpt.begin_save(step);
  world.barrier().wait();  // the staging directory exists
  nlohmann::json rec;
  if (!files.empty()) rec = CheckpointManager::write_files(ckpt.staging_dir(step), step, files);
  const std::vector<std::string> recs = gather_strings(world, rec.is_null() ? "" : rec.dump());
  if (!lead) return dir;
  std::vector<nlohmann::json> all;
  for (const std::string& r : recs)
    if (!r.empty()) all.push_back(nlohmann::json::parse(r));
  return ckpt.commit_save(step, all, manifest_state);
}

// The PEFT adapter files of a LoRA run. Under tensor or pipeline parallelism the adapters are
// spread over the ranks: they are read back whole from the checkpoint just committed, into a
// whole model with the same LoRA wrapping, and written from there.
void save_lora_adapter(ExecContext& ctx, const RunConfig& cfg, Transformer* whole,
                       const std::string& checkpoint, const fs::path& dir) {
  if (whole) return save_peft_adapter(*whole, cfg.lora, cfg.lora.init_from, dir);
  Transformer gathered(ctx, cfg.model);
  apply_lora(gathered, cfg.lora, cfg.model.seed);
  load_weights(gathered, CheckpointManager::load(checkpoint).model);
  save_peft_adapter(gathered, cfg.lora, cfg.lora.init_from, dir);
}

}  // namespace braid
