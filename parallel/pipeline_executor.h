// PipelineExecutor: runs one stage's row of a PipelineSchedule on real Transformer stages,
// with activations and their gradients sent point-to-point over the pipeline communicator.
//
// Each stage holds v model chunks (v = 1 except for interleaved-1f1b); chunk c is the
// Transformer of virtual stage c * p + stage, built with pipeline_block_range(). One step:
//   F(mb, c): receive the activation (not on virtual stage 0), forward with the micro-batch's
//             MicroBatch, send the output (not on the last virtual stage);
//   B(mb, c): on the last virtual stage loss() runs first (the fused LM head writes its weight
//             gradient there, so gradients accumulate in backward order), then the output
//             gradient is received (other virtual stages), backward runs and the input gradient
//             goes to the previous virtual stage;
//   W(mb, c): zb-h1 only: the MicroBatch was made with defer_weight_grads, W runs its queue.
// After the row, GPT-2's tied embedding gradient is summed over the embedding group (first and
// last stage) and every pending send is waited for. Parameter gradients accumulate (+=); the
// caller zeroes them before the step and runs the optimizer after it.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "core/kernels/cross_entropy.h"
#include "core/models/transformer.h"
#include "core/profile.h"
#include "parallel/chrome_trace.h"
#include "parallel/communicator.h"
#include "parallel/pipeline_schedule.h"

namespace braid {

// Blocks of virtual stage `vs` of `num_virtual` over n_layer blocks. `split` (optional, the
// config's parallel.pp_split) gives each virtual stage's block count explicitly; otherwise the
// split is even with the remainder going to the earliest stages. Throws braid::UserError when
// split does not have num_virtual positive entries summing to n_layer, or n_layer < num_virtual.
BlockRange pipeline_block_range(int n_layer, int num_virtual, int vs,
                                const std::vector<int>& split = {});

// One step's data. tokens are needed on the stage holding virtual stage 0, targets on the stage
// holding the last one; both are m tensors of (batch, seq) i32 (empty vectors elsewhere).
struct PipelineStepInput {
  std::vector<Tensor> tokens;
  std::vector<Tensor> targets;
  int64_t batch = 0;
  int64_t seq = 0;
  float grad_scale = 1.0f;  // multiplies d(sum of token losses), e.g. 1 / tokens per step
  // Per micro-batch (B, T) i32 host sample starts of packed rows (MicroBatch::sample_starts);
  // empty, or undefined entries: unpacked.
  std::vector<Tensor> sample_starts = {};
};

struct PipelineStepResult {
  LossSum loss;       // summed over the step's micro-batches on the last stage; zero elsewhere
  double wall_s = 0;  // this stage: from the step's start barrier to its last action
  // this stage's F, B and W time: on a GPU the device's, from events on the context's stream
  // around each of them (the host only queues the kernels), on a CPU the host's
  double busy_s = 0;
  double makespan_s = 0;  // the longest wall_s over the stages
  // 1 - busy_s / makespan_s: the share of the step this stage spent not computing.
  double bubble() const { return makespan_s > 0 ? 1.0 - busy_s / makespan_s : 0.0; }
};

struct PipelineExecutorOptions {
  // Element type of the activations and gradients between stages (the model's compute dtype).
  DType activation_dtype = DType::F32;
  // The activations between stages hold 1 / seq_shards of every sequence (sequence
  // parallelism: each tensor-parallel rank sends and receives its slice).
  int seq_shards = 1;
  // Record a timeline of every action (trace()); off by default.
  bool trace = false;
  int trace_pid = -1;  // the process row of this rank in the trace; -1: the world rank
  // Passed to every MicroBatch: called once per trainable parameter per micro-batch when its
  // contribution is complete (data-parallel buckets). The tied GPT-2 embedding is final only
  // after the step's embedding-group all-reduce, i.e. when step() returns.
  std::function<void(Parameter&)> on_grad_ready;
  // Called for every MicroBatch the executor makes, with its micro-batch index, before its
  // forward: the trainer sets the dropout stream and attaches the gradient buckets there.
  std::function<void(MicroBatch&, int mb)> prepare_micro_batch;
  // Times the F, B and W actions on the device: marks around each (busy_s and the trace's
  // compute bars are then device times). Null: the context's stream on a GPU, none on a CPU
  // (host times). Tests pass a scripted one.
  std::shared_ptr<DeviceTimeline> device_timeline;
};

class PipelineExecutor {
 public:
  // stage: this rank's stage (pp->rank()); chunks[c]: virtual stage c * p + stage. pp may be
  // null only when p == 1; embedding is the MeshComms embedding group (null on middle stages
  // and allowed to be null when p == 1). All pointers must outlive the executor.
  PipelineExecutor(ExecContext& ctx, PipelineSchedule schedule, int stage,
                   std::vector<Transformer*> chunks, Communicator* pp, Communicator* embedding,
                   PipelineExecutorOptions options = {});

  // Runs the row once. Collective over the pipeline group (every stage calls it).
  PipelineStepResult step(const PipelineStepInput& in);

  // Evaluation of one batch without gradients: the virtual stages run forward_eval in order,
  // each sending its output to the next. Collective over the pipeline group. Returns the loss
  // on the stage holding the last virtual stage (tokens there may be empty) and zero elsewhere
  // (targets needed only there).
  LossSum evaluate(const Tensor& tokens, const Tensor& targets, int64_t batch, int64_t seq,
                   const Tensor& sample_starts = Tensor());

  const PipelineSchedule& schedule() const { return schedule_; }
  // Recorded actions (options.trace), times in microseconds since the first step's start.
  const std::vector<TraceEvent>& trace() const { return events_; }
  void clear_trace() { events_.clear(); }

 private:
  struct Key {
    int mb, chunk;
    bool operator<(const Key& o) const { return mb != o.mb ? mb < o.mb : chunk < o.chunk; }
  };
  int vstage(int chunk) const { return schedule_.virtual_stage(stage_, chunk); }
  bool is_first(int chunk) const { return vstage(chunk) == 0; }
  bool is_last(int chunk) const { return vstage(chunk) == schedule_.num_virtual_stages() - 1; }
  int tag(int mb, int receiving_vs, bool grad) const;
  void post_recv(const Action& a);
  Tensor take_recv(const Action& a);
  void run_action(const Action& a, const PipelineStepInput& in, PipelineStepResult& r);
  void sum_tied_embedding();
  void record(const Action* a, const char* category, double t0, double t1, int tid);
  // A compute action's host time t0..t1: added to busy_s and recorded, or, with a device
  // timeline, marked at both ends there and settled in settle_device_times().
  void begin_compute();
  void end_compute(const Action& a, const char* category, double t0, PipelineStepResult& r);
  void settle_device_times(PipelineStepResult& r);
  double now_us() const;

  ExecContext& ctx_;
  PipelineSchedule schedule_;
  int stage_;
  std::vector<Transformer*> chunks_;
  Communicator* pp_;
  Communicator* embedding_;
  PipelineExecutorOptions options_;
  // Per-step state.
  std::map<Key, std::unique_ptr<MicroBatch>> mbs_;
  std::map<Key, Tensor> outputs_;  // last virtual stage: forward outputs awaiting the loss
  std::map<Key, Tensor> grads_;    // received / computed tensors awaiting their action
  struct PendingRecv {
    Tensor buf;
    Work work;
  };
  std::map<std::pair<Key, bool>, PendingRecv> recvs_;  // (key, is_grad)
  std::vector<Work> sends_;
  std::vector<TraceEvent> events_;
  std::shared_ptr<DeviceTimeline> timeline_;  // null: compute actions timed on the host
  struct DeviceSpan {
    size_t begin_mark, end_mark;  // the marks around the action, counted from the step's first
    long event = -1;              // its entry in events_, or -1 (no trace)
  };
  std::vector<DeviceSpan> spans_;  // this step's compute actions, with a device timeline
  size_t first_mark_ = 0;          // the timeline's pending marks before this step's first
  double origin_us_ = -1;          // steady-clock microseconds of the first step's start
  double step_start_us_ = 0;
  int64_t current_batch_ = 0, current_seq_ = 0;
};

// Gathers every member's events to group rank 0 of comm (collective; the others get an empty
// vector). For one trace file of the whole job, pass the world communicator.
std::vector<TraceEvent> gather_trace(Communicator& comm, const std::vector<TraceEvent>& local);

// The L2 norm of the trainable gradients of `params` over the pipeline group: each stage's
// sum of squares (replicas skipped, so the tied GPT-2 table counts once) summed over pp.
double pipeline_grad_norm(ExecContext& ctx, const std::vector<Parameter*>& params,
                          Communicator* pp);

}  // namespace braid
