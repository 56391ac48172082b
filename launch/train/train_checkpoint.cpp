// The trainer's checkpoints: manifest state, per-layout writers, LoRA adapter files, the hook.
#include "launch/train/train_checkpoint.h"

#include <optional>

#include "core/models/lora.h"
#include "launch/config/config.h"
#include "launch/config/config_json.h"
#include "launch/io/checkpoint_tensors.h"
#include "launch/io/lora_adapter.h"
#include "launch/io/model_io.h"
#include "launch/train/train_log.h"
#include "launch/train/train_run.h"
#include "parallel/scalar_reduce.h"

namespace braid {

namespace fs = std::filesystem;

// The manifest's `state`: everything besides the tensors that a resume needs.
nlohmann::json checkpoint_state(const RunConfig& cfg, int64_t done, const Optimizer& opt,
                                const ParallelLayout& layout) {
  nlohmann::json j = {
      {"model", fields_to_json(cfg.model)},
      // The layout that wrote it. Tensors are read back whole whatever it was
      // (launch/io/checkpoint_tensors.h), and ZeRO-1 writes whole per-parameter moments, so any
      // (dp, tp, pp), with or without ZeRO-1, can load it.
      {"layout", {{"dp", layout.dp}, {"tp", layout.tp}, {"pp", layout.pp}, {"zero", layout.zero}}},
      {"optimizer_steps", opt.steps_taken()},
      {"data",
       {{"seed", cfg.data.seed},
        {"next_step", done},
        // Step s reads global sequences [s * global_batch, (s + 1) * global_batch): a resume
        // must keep it (data/epochs.h), so it is checked against the resuming layout's.
        {"global_batch", cfg.data.micro_batch * cfg.data.grad_accum * layout.dp}}},
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
        rec["tp"] =
            state_shard_record(name, *p, tp_rank, shape_numel(rec.at("global_shape").get<Shape>()));
      } else if (tp_rank != 0) {
        continue;  // replicated: written once, by tensor-parallel rank 0
      }
      file.shards[name] = std::move(rec);
      file.tensors.emplace_back(name, t);
    }
    files.push_back(std::move(file));
  } else if (dp_rank == 0) {
    files =
        model.checkpoint_files(checkpoint_weights(opt, model, true), opt.state_tensors(nullptr));
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
  // In host memory: on a GPU run the whole model would not fit beside the rank's training state.
  std::optional<ExecContext> host;
  if (!ctx.device().is_cpu()) host.emplace();
  Transformer gathered(host ? *host : ctx, cfg.model);
  apply_lora(gathered, cfg.lora, cfg.model.seed);
  // Only the adapters are read: a QLoRA checkpoint holds no quantised base weight.
  std::vector<Parameter*> adapters;
  for (Parameter* p : gathered.parameters())
    if (p->trainable) adapters.push_back(p);
  load_weights(adapters, CheckpointManager::load(checkpoint).model);
  save_peft_adapter(gathered, cfg.lora, cfg.lora.init_from, dir);
}

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

CheckpointHook::CheckpointHook(TrainRun& run, TrainSummary& summary)
    : run_(run),
      summary_(summary),
      last_(run.resume_from.value_or("")),
      last_time_(std::chrono::steady_clock::now()) {}

void CheckpointHook::on_step_end(StepInfo& s) {
  const int64_t done = s.step;
  int stop_signal = run_.stop->requested();
  bool due = checkpoint_due(run_.cfg.checkpoint, done, run_.cfg.train.steps,
                            seconds_since(last_time_) / 60.0, stop_signal != 0);
  {
    // Ranks' clocks and signal arrival differ: agree, so all save and stop at the same step.
    const std::vector<int> agreed = all_max_ints(run_.dims.world(), {due ? 1 : 0, stop_signal});
    due = agreed[0] != 0;
    stop_signal = agreed[1];
  }
  if (due) {
    maybe_fail(run_.dist, done, /*saving=*/true);
    const auto t_save = std::chrono::steady_clock::now();
    nlohmann::json manifest_state = checkpoint_state(run_.cfg, done, *run_.opt, run_.layout);
    if (!run_.quantised_base.is_null()) manifest_state["quantised_base"] = run_.quantised_base;
    if (run_.loader->epoch_mode()) {  // where the next step starts: (epoch, sequence in it)
      const auto [epoch, seq] = run_.loader->with_epochs(
          [&](EpochStream& e) { return e.locate(done * run_.loader->global_batch()); });
      manifest_state["data"]["epoch"] = epoch;
      manifest_state["data"]["epoch_sequence"] = seq;
    }
    last_ = write_checkpoint(run_.ckpt, done, *run_.model, *run_.opt, manifest_state,
                             run_.dims.world(), run_.dims.lead(), run_.dims.coord().dp);
    if (run_.dims.lead() && run_.cfg.lora.enabled())  // the adapters alone, PEFT layout
      save_lora_adapter(*run_.ctx, run_.cfg, run_.model->whole(), last_, run_.run_dir / "adapter");
    run_.dims.world().barrier().wait();  // the checkpoint is complete for every rank
    last_time_ = std::chrono::steady_clock::now();
    run_.log.record("checkpoint",
                    {{"step", done}, {"path", last_}, {"save_s", seconds_since(t_save)}});
    run_.log.say(fmt::format("checkpoint: {}", last_));
  }
  if (stop_signal == 0) return;
  summary_.stopped_by = StopSignals::name(stop_signal);
  run_.log.record("stop", {{"step", done}, {"signal", summary_.stopped_by}, {"checkpoint", last_}});
  run_.log.say(fmt::format(
      "stopped by {} after step {}/{}; checkpoint: {}\nrun the same command again to continue "
      "(checkpoint.resume: auto)",
      summary_.stopped_by, done, run_.cfg.train.steps, last_));
  s.stop = true;
}

}  // namespace braid
