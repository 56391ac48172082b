// ParallelConfig: the rank mesh, communication timeouts, gradient buckets and the pipeline
// schedule.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "core/config_fields.h"
#include "core/dtype.h"

namespace braid {

// Which library carries the communication: auto picks NCCL when the run computes on a GPU
// (train.device resolves to cuda) and MPI otherwise.
enum class CommBackend { Auto, Mpi, Nccl };
constexpr std::array<EnumName<CommBackend>, 3> config_enum_names(CommBackend) {
  return {{{CommBackend::Auto, "auto"}, {CommBackend::Mpi, "mpi"}, {CommBackend::Nccl, "nccl"}}};
}
// The backend a run uses: `choice` resolved for a run computing on a GPU (on_gpu) or the CPU.
// Throws ConfigError (key "backend") for nccl on a CPU run, or a binary built without NCCL
// (nccl_built false).
CommBackend resolve_comm_backend(CommBackend choice, bool on_gpu, bool nccl_built);

struct ParallelConfig {
  std::optional<int> dp;  // empty (auto): world size / (tp * pp)
  int tp = 1;
  int pp = 1;
  CommBackend backend = CommBackend::Auto;
  double timeout_s = 300.0;
  double init_timeout_s = 120.0;
  double bucket_mb = 25.0;
  double first_bucket_mb = 1.0;
  std::string allreduce_dtype = "f32";
  std::string schedule = "1f1b";
  int virtual_stages = 1;
  std::vector<int> pp_split;
  int vocab_align = 8;
  bool sequence_parallel = false;
  bool trace = false;

  template <class V>
  void visit(V& v) {
    v("dp", dp,
      "Data-parallel degree: a number, or auto for world size / (tp * pp). dp * tp * pp must equal "
      "the number of ranks.");
    v("tp", tp,
      "Tensor-parallel degree (ranks ordered tp fastest, so a TP group stays on one node).");
    v("pp", pp, "Pipeline-parallel degree (number of stages).");
    v("backend", backend,
      "Communication library: auto (NCCL when the run computes on a GPU, MPI otherwise), mpi "
      "(host memory) or nccl (GPU memory; needs train.device cuda and a build with NCCL).");
    v("timeout_s", timeout_s,
      "A collective, send or receive not finished after this many seconds ends the whole job with "
      "a message naming the operation, group and ranks.");
    v("init_timeout_s", init_timeout_s,
      "The same limit for start-up (building the communicators), which waits for the slowest rank "
      "to arrive.");
    v("bucket_mb", bucket_mb,
      "Gradient bucket size in MiB: the data-parallel all-reduce is issued per bucket while the "
      "backward pass runs.");
    v("first_bucket_mb", first_bucket_mb,
      "Size of the first bucket (the last layers' gradients), kept small so communication starts "
      "early.");
    v("allreduce_dtype", allreduce_dtype,
      "Element type of the gradient all-reduce: f32, bf16 or f16 (16-bit types halve the bytes; "
      "over MPI the sums are computed in f32 per step, over NCCL in the 16-bit type).");
    v("schedule", schedule, "Pipeline schedule: gpipe, 1f1b, interleaved-1f1b or zb-h1.");
    v("virtual_stages", virtual_stages,
      "Model chunks per pipeline stage for interleaved-1f1b (1 otherwise).");
    v("pp_split", pp_split,
      "Blocks per pipeline (virtual) stage, e.g. [3, 5]; empty: the split that balances the "
      "stages' "
      "FLOPs with the LM head counted on the last one (the even split, remainder to the earliest "
      "stages, when the head costs less than a block).");
    v("vocab_align", vocab_align,
      "Under tensor parallelism the vocabulary is padded to a multiple of tp * vocab_align (padded "
      "logits are masked out of the loss; checkpoints and export drop the padding).");
    v("sequence_parallel", sequence_parallel,
      "Sequence parallelism under tensor parallelism: norms, residuals and the activations between "
      "pipeline stages hold each rank's 1/tp of every sequence (reduce-scatter and all-gather "
      "instead of all-reduce); data.seq_len must be a multiple of tp. No effect with tp = 1.");
    v("trace", trace,
      "Write the timeline of every rank's pipeline actions to RUN_DIR/trace.json (Chrome trace "
      "JSON, opens in Perfetto; tools/plot_trace.py draws it).");
  }
  void validate() const;

  // dp as a number; 0 when it is auto.
  int dp_degree() const { return dp.value_or(0); }
  // allreduce_dtype as a DType. Call after validate().
  DType allreduce_dtype_value() const;
};

}  // namespace braid
