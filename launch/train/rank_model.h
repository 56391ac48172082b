// RankModel: the part of the model one rank trains, in any (dp, tp, pp) layout, and the one
// way a step runs: the pipeline schedule's row for this rank's stage (with one stage and one
// chunk that is plain gradient accumulation, F0 B0 F1 B1 ...).
//
// Built in this order, so that every layout starts from the same weights as one rank:
//   1. the chunks of this stage (virtual stages c * pp + stage, parallel.pp_split), each
//      initialised from (seed, tensor name);
//   2. whole weights from lora.init_from's model or run.init_from;
//   3. the tensor-parallel pass, which keeps this rank's shard of every split tensor;
//   4. the training passes (LoRA, whose adapters follow their base's split, and activation
//      checkpointing), and the group sums of split adapters;
//   5. on resume, every tensor's part of the checkpoint's whole tensors (whatever layout
//      wrote it).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "core/models/transformer.h"
#include "data/sampler.h"
#include "launch/io/checkpoint.h"
#include "launch/io/model_io.h"
#include "launch/config/train_config.h"
#include "parallel/pipeline_executor.h"

namespace braid {

struct RankModelComms {
  Communicator* tp = nullptr;         // null: no tensor parallelism
  Communicator* pp = nullptr;         // null: one stage
  Communicator* embedding = nullptr;  // first + last stage; null elsewhere or with one stage
};

class RankModel {
 public:
  // init_from: run.init_from, or "" (lora.init_from is read from cfg, tensor by tensor:
  // build_model); resume: the checkpoint's model tensors, or null. verbose: print one line per
  // pass.
  RankModel(ExecContext& ctx, const RunConfig& cfg, const RankModelComms& comms,
            const std::string& init_from, const CheckpointTensors* resume, bool verbose);

  int tp_size() const { return tp_ ? tp_->size() : 1; }
  int tp_rank() const { return tp_ ? tp_->rank() : 0; }
  int stages() const { return pp_ ? pp_->size() : 1; }
  int stage() const { return pp_ ? pp_->rank() : 0; }
  const PipelineSchedule& schedule() const { return executor_->schedule(); }
  // Blocks of each virtual stage (pipeline_split); empty with one stage.
  const std::vector<int>& block_split() const { return split_; }
  PipelineExecutor& executor() { return *executor_; }

  // Every parameter of this rank's chunks, chunk by chunk, each in order of use.
  const std::vector<Parameter*>& parameters() const { return params_; }
  // Parameters whose gradient gets one more contribution after the step's micro-batches:
  // GPT-2's tied embedding on the first and last stage, summed over the two by step(), and
  // parts several tensor-parallel ranks hold (kv heads when tp > n_kv_head), summed over their
  // holders by step().
  std::vector<Parameter*> late_parameters() const;
  // The one model when tp = pp = 1 (end-of-run sample, PEFT adapter files); else null.
  Transformer* whole() { return tp_size() == 1 && stages() == 1 ? chunks_[0].get() : nullptr; }
  int64_t local_numel() const;  // elements of the parameters held here (replicas included)

  void zero_grad();
  // One optimizer step's forward and backward over `micro` (every micro-batch of this DP rank;
  // the first stage reads the tokens, the last the targets). `prepare` is called for every
  // MicroBatch before its forward, with its index. Collective over tp and pp. Returns the loss
  // (on the last stage; zero elsewhere) and the stage's timing.
  PipelineStepResult step(const std::vector<Batch>& micro, float grad_scale,
                          const std::function<void(MicroBatch&, int)>& prepare);
  // Evaluation of one batch; the loss on the last stage, zero elsewhere. Collective over tp, pp.
  LossSum evaluate(const Batch& b);

  // The checkpoint files this (tp rank, stage) writes: the weights and optimizer state it owns
  // (split tensors as its shard; replicated ones by tensor-parallel rank 0 only), with their
  // shard records. `weights` / `optimizer_state`: (name, tensor) as the optimizer holds them.
  std::vector<CheckpointFile> checkpoint_files(
      const std::vector<std::pair<std::string, Tensor>>& weights,
      const std::vector<std::pair<std::string, Tensor>>& optimizer_state) const;
  // This rank's part of the whole tensor `whole` stored under `name` (a parameter's name, or
  // an optimizer state name "<parameter>.<suffix>").
  Tensor local_part(const std::string& name, const Tensor& whole) const;
  // The whole (unpadded) shape of the tensor stored under `name`.
  Shape whole_shape(const std::string& name) const;
  // The parameter a tensor name belongs to (a parameter or its optimizer state); null if none.
  const Parameter* owner(const std::string& name) const;

 private:
  ExecContext& ctx_;
  Communicator* tp_;
  Communicator* pp_;
  std::vector<std::unique_ptr<Transformer>> chunks_;
  std::vector<Parameter*> params_;
  std::unique_ptr<PipelineExecutor> executor_;
  std::function<void(MicroBatch&, int)> prepare_;  // of the step in progress
  int micro_batches_ = 1;
  std::vector<int> split_;
};

// Blocks of each of num_virtual virtual stages: parallel.pp_split when given, else the split
// that balances the stages' forward + backward FLOPs per token (ModelConfig's, at
// data.seq_len) with the LM head counted on the last one (parallel/stage_split.h). Empty for
// one stage (or fewer blocks than stages, which pipeline_block_range refuses). The planner
// models braid runs with the same split (plan::braid_virtual_stage_blocks).
std::vector<int> pipeline_split(const RunConfig& cfg, int num_virtual);

// Throws braid::UserError (naming the keys) for a layout this model and batch cannot run:
// tensor-parallel sizes that do not split, more stages than blocks, a schedule that needs more
// micro-batches, or a combination braid does not support yet.
void check_rank_layout(const RunConfig& cfg, int tp, int pp, int dp);

}  // namespace braid
