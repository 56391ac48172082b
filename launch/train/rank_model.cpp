// RankModel: this rank's chunks, the tensor-parallel pass, the pipeline step and checkpoints.
#include "launch/train/rank_model.h"

#include "core/models/lora.h"
#include "launch/train/model_passes.h"
#include "launch/train/train_optimizer.h"
#include "parallel/stage_split.h"
#include "parallel/tensor_parallel.h"

namespace braid {

namespace {

PipelineSchedule schedule_for(const RunConfig& cfg, int stages) {
  ScheduleKind kind = ScheduleKind::OneFOneB;
  parse_schedule_kind(cfg.parallel.schedule, &kind);  // validated with the config
  // Layer checks belong to pipeline_block_range (it knows parallel.pp_split).
  return build_pipeline_schedule(
      {kind, stages, cfg.data.grad_accum, cfg.parallel.virtual_stages, 0});
}

}  // namespace

std::vector<int> pipeline_split(const RunConfig& cfg, int num_virtual) {
  std::vector<int> split = cfg.parallel.pp_split;
  if (!split.empty() || num_virtual == 1 || cfg.model.n_layer < num_virtual) return split;
  const ModelConfig& m = cfg.model;
  return min_max_stage_blocks(
      m.n_layer, num_virtual,
      {m.block_flops_per_token(cfg.data.seq_len), 0.0, m.head_flops_per_token()});
}

void check_rank_layout(const RunConfig& cfg, int tp, int pp, int dp) {
  TensorParallelOptions o;
  o.vocab_align = cfg.parallel.vocab_align;
  check_tensor_parallel(cfg.model, tp, o);
  if (cfg.parallel.sequence_parallel && tp > 1)
    BRAID_USER_CHECK(cfg.data.seq_len % tp == 0,
                     "parallel.sequence_parallel splits every sequence over the {} tensor-parallel "
                     "ranks, but data.seq_len = {} is not a multiple of parallel.tp = {}; choose "
                     "a seq_len divisible by {} or set sequence_parallel: false",
                     tp, cfg.data.seq_len, tp, tp);
  const PipelineSchedule s = schedule_for(cfg, pp);
  const std::vector<int> split = pipeline_split(cfg, s.num_virtual_stages());
  for (int vs = 0; vs < s.num_virtual_stages(); ++vs)
    pipeline_block_range(cfg.model.n_layer, s.num_virtual_stages(), vs, split);
  (void)dp;
}

RankModel::RankModel(ExecContext& ctx, const RunConfig& cfg, const RankModelComms& comms,
                     const std::string& init_from,
                     const CheckpointTensors* resume, bool verbose)
    : ctx_(ctx), tp_(comms.tp), pp_(comms.pp) {
  if (tp_ && tp_->size() == 1) tp_ = nullptr;
  if (pp_ && pp_->size() == 1) pp_ = nullptr;
  PipelineSchedule sched = schedule_for(cfg, stages());
  micro_batches_ = sched.spec.micro_batches;
  split_ = pipeline_split(cfg, sched.num_virtual_stages());
  const std::vector<int>& split = split_;
  TensorParallelOptions tpo;
  tpo.vocab_align = cfg.parallel.vocab_align;
  tpo.sequence_parallel = cfg.parallel.sequence_parallel && tp_;
  for (int c = 0; c < sched.spec.virtual_stages; ++c) {
    const int vs = sched.virtual_stage(stage(), c);
    const BlockRange r =
        pipeline_block_range(cfg.model.n_layer, sched.num_virtual_stages(), vs, split);
    // The passes see the single-rank model on every layout; tensor parallelism places it last,
    // and each tensor-parallel rank quantises its own part of a split base, in its own blocks.
    std::unique_ptr<Transformer> t = build_model(
        ctx, cfg, r, resume ? "" : init_from,
        [&](Transformer& m) {
          if (tp_) apply_tensor_parallel(ctx, m, *tp_, tpo);
        },
        tp_rank(), verbose && c == 0);
    if (resume) {  // each parameter takes its part of the whole tensor
      for (Parameter* p : t->parameters()) {
        check_tensor_matches(*resume, p->name, whole_shape_of(*p), DType::F32);
        p->value.copy_from(local_part_of(resume->get(p->name), *p, tp_rank()));
      }
    }
    for (Parameter* p : t->parameters()) params_.push_back(p);
    chunks_.push_back(std::move(t));
  }
  std::vector<Transformer*> ptrs;
  for (auto& c : chunks_) ptrs.push_back(c.get());
  PipelineExecutorOptions eo;
  eo.trace = cfg.parallel.trace;
  eo.activation_dtype = precision_dtype(cfg.train.precision);
  eo.seq_shards = tpo.sequence_parallel ? tp_size() : 1;
  eo.prepare_micro_batch = [this](MicroBatch& mb, int i) {
    if (prepare_) prepare_(mb, i);
  };
  executor_ = std::make_unique<PipelineExecutor>(ctx, std::move(sched), stage(), std::move(ptrs),
                                                 pp_, pp_ ? comms.embedding : nullptr, eo);
}

std::vector<Parameter*> RankModel::late_parameters() const {
  std::vector<Parameter*> out;
  if (pp_)
    for (const auto& c : chunks_)
      if (Parameter* t = c->tied_embedding(); t && t->trainable) out.push_back(t);
  for (Parameter* p : params_)  // replicated kv heads: summed over their holders by step()
    if (p->shard.replicas > 1 && p->trainable && !p->replica) out.push_back(p);
  return out;
}

int64_t RankModel::local_numel() const {
  int64_t n = 0;
  for (const Parameter* p : params_) n += p->value.numel();
  return n;
}

void RankModel::zero_grad() {
  for (auto& c : chunks_) c->zero_grad(ctx_);
}

PipelineStepResult RankModel::step(const std::vector<Batch>& micro, float grad_scale,
                                   const std::function<void(MicroBatch&, int)>& prepare) {
  BRAID_CHECK(static_cast<int>(micro.size()) == micro_batches_, "{} micro-batches for a step of {}",
              micro.size(), micro_batches_);
  PipelineStepInput in;
  // Token ids go where the model computes (on a GPU: copied from the loader's host batches).
  for (const Batch& b : micro) {
    in.tokens.push_back(ctx_.to_device(b.tokens));
    in.targets.push_back(ctx_.to_device(b.targets));
    in.sample_starts.push_back(b.sample_starts);  // read on the host by the attention kernel
  }
  in.batch = micro[0].tokens.dim(0);
  in.seq = micro[0].tokens.dim(1);
  in.grad_scale = grad_scale;
  prepare_ = prepare;
  PipelineStepResult r = executor_->step(in);
  prepare_ = nullptr;
  if (tp_) sum_replicated_parts(ctx_, params_, *tp_);
  return r;
}

LossSum RankModel::evaluate(const Batch& b) {
  return executor_->evaluate(ctx_.to_device(b.tokens), ctx_.to_device(b.targets), b.tokens.dim(0),
                             b.tokens.dim(1), b.sample_starts);  // read on the host
}

const Parameter* RankModel::owner(const std::string& name) const {
  for (const Parameter* p : params_) {
    if (name == p->name) return p;
    if (name.size() > p->name.size() && name.compare(0, p->name.size(), p->name) == 0 &&
        name[p->name.size()] == '.' && name.find('.', p->name.size() + 1) == std::string::npos)
      return p;
  }
  return nullptr;
}

std::vector<CheckpointFile> RankModel::checkpoint_files(
    const std::vector<std::pair<std::string, Tensor>>& weights,
    const std::vector<std::pair<std::string, Tensor>>& optimizer_state) const {
  std::vector<CheckpointFile> out;
  const int tp = tp_size(), pp = stages();
  auto file = [&](const std::string& kind, const std::vector<std::pair<std::string, Tensor>>& in) {
    CheckpointFile f;
    f.name = checkpoint_file_name(kind, tp, pp, tp_rank(), stage());
    for (const auto& [name, t] : in) {
      const Parameter* p = owner(name);
      BRAID_CHECK(p, "checkpoint tensor {} belongs to no parameter of this rank", name);
      if (p->replica) continue;  // the tied head's copy: the first stage saves the original
      if (p->shard.sharded()) {
        if (tp_rank() % p->shard.replicas != 0) continue;  // a shared part: its first holder
        f.shards[name] = state_shard_record(name, *p, tp_rank(), t.numel());
      } else if (tp_rank() != 0) {
        continue;  // replicated: written once, by tensor-parallel rank 0
      }
      f.tensors.emplace_back(name, t);
    }
    out.push_back(std::move(f));
  };
  file("model", weights);
  out.back().widen_16bit = true;  // f32 weights (frozen 16-bit ones widened as written)
  file("optimizer", optimizer_state);
  return out;
}

Shape RankModel::whole_shape(const std::string& name) const {
  const Parameter* p = owner(name);
  BRAID_CHECK(p, "{} belongs to no parameter of this rank", name);
  return whole_shape_of(*p);
}

Tensor RankModel::local_part(const std::string& name, const Tensor& whole) const {
  const Parameter* p = owner(name);
  BRAID_CHECK(p, "{} belongs to no parameter of this rank", name);
  return local_part_of(whole, *p, tp_rank());
}

}  // namespace braid
