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
nlohmann::json checkpoint_state(const RunConfig& cfg, int64_t done, int64_t optimizer_steps,
                                const MixedPrecision& mp, const ParallelLayout& layout) {
  nlohmann::json j = {
      {"model", fields_to_json(cfg.model)},
      // The layout that wrote it. Tensors are read back whole whatever it was
      // (launch/checkpoint_tensors.h), and ZeRO-1 writes whole per-parameter moments, so any
      // (dp, tp, pp), with or without ZeRO-1, can load it.
      {"layout", {{"dp", layout.dp}, {"tp", layout.tp}, {"pp", layout.pp}, {"zero", layout.zero}}},
      {"optimizer_steps", optimizer_steps},
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
  if (mp.scaling()) j["loss_scaler"] = mp.state_json();
  return j;
}

std::string write_checkpoint(CheckpointManager& ckpt, int64_t step, const RankModel& model,
                             MixedPrecision& mp, const AdamW* plain, const ZeroAdamW* zero,
                             const nlohmann::json& manifest_state, Communicator* world, bool lead,
                             int dp_rank) {
  const std::string dir = (fs::path(ckpt.dir()) / CheckpointManager::dir_name(step)).string();
  const bool whole_model = model.tp_size() == 1 && model.stages() == 1;
  if (!world || (whole_model && !zero)) {  // rank 0 alone
    if (!lead) return dir;
    return ckpt.save(step, mp.checkpoint_weights(), plain->state_tensors(), manifest_state);
  }
  std::vector<CheckpointFile> files;
  if (zero) {
    // The weights of each (tp, pp) shard from its DP rank 0 (gathered over DP: 16 bits,
    // collective); every rank's own moments, as flat pieces of its local tensors (with the
    // tensor-parallel record of a split parameter; replicated ones from tp rank 0 only).
    const bool writer = dp_rank == 0;
    const auto weights = mp.gather_checkpoint_weights(writer);
    if (writer) files.push_back(std::move(model.checkpoint_files(weights, {})[0]));
    const int tp_rank = model.tp_rank();
    CheckpointFile opt{whole_model ? fmt::format("optimizer-dp{}.safetensors", dp_rank)
                                   : fmt::format("optimizer-tp{}-pp{}-dp{}.safetensors", tp_rank,
                                                 model.stage(), dp_rank),
                       {},
                       nlohmann::json::object()};
    nlohmann::json pieces;
    for (auto& [name, t] : zero->shard_state(pieces)) {
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
      opt.shards[name] = std::move(rec);
      opt.tensors.emplace_back(name, t);
    }
    files.push_back(std::move(opt));
  } else if (dp_rank == 0) {
    files = model.checkpoint_files(mp.checkpoint_weights(), plain->state_tensors());
  }
  if (lead) ckpt.begin_save(step);
  world->barrier().wait();  // the staging directory exists
  nlohmann::json rec;
  if (!files.empty()) rec = CheckpointManager::write_files(ckpt.staging_dir(step), step, files);
  const std::vector<std::string> recs = gather_strings(*world, rec.is_null() ? "" : rec.dump());
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
