// Tensor-parallel layers (Megatron-style): what the tensor-parallel pass puts in place of the
// model's attention, MLP and token embedding. Each rank holds its shard of every split weight;
// activations entering and leaving a block's attention and MLP are replicated on every rank.
//
// The conjugate communication pairs:
// - entering a parallel region (before the column-parallel projections): identity forward,
//   all-reduce(sum) of the input gradient backward (TpSelfAttention / TpMLP backward);
// - leaving it (RowParallelLinear): all-reduce(sum) of the partial outputs forward, identity
//   backward.
// Column-parallel projections are plain Linear modules holding the rank's rows of the weight.
//
// With sequence parallelism (parallel/sequence_parallel.h) the activations outside the regions
// are each rank's slice of the sequences, and the pairs become all-gather forward /
// reduce-scatter backward (entering) and reduce-scatter forward / all-gather backward
// (leaving). The gathered input of the column-parallel projections is not kept: their backward
// gathers it again from the slice (MicroBatch::recompute_later), as Korthikanti et al. do.
#pragma once

#include <memory>

#include "core/model_config.h"
#include "core/models/layers.h"
#include "parallel/communicator.h"

namespace braid {

// y = all_reduce(x_r W_r^T) + b: the input's last dimension and the weight's columns are split;
// the bias is replicated (added by group rank 0 only before the sum). Weight gradients may be
// deferred like Linear's. Replicated inputs of the backward make the bias gradient the same on
// every rank, so it needs no reduction.
class RowParallelLinear : public Module, public LinearLike {
 public:
  // weight: (out, in / tp) shard; bias: (out) or undefined.
  // sequence_parallel: the output is this rank's slice of the sum (reduce-scatter), and the
  // backward gathers the slices of dy.
  RowParallelLinear(const std::string& path, Tensor weight, Tensor bias, Communicator& tp,
                    bool sequence_parallel = false);
  Tensor forward(const Tensor& x, MicroBatch& mb) override;
  Tensor backward(const Tensor& dy, MicroBatch& mb) override;
  Tensor infer(const Tensor& x, InferState& st) override;
  void own_parameters(std::vector<Parameter*>& out) override;
  Parameter& linear_weight() override { return weight; }

  Parameter weight;
  std::unique_ptr<Parameter> bias;

 private:
  Tensor run(ExecContext& ctx, const Tensor& x);
  Communicator& tp_;
  bool sp_;
};

// Attention on this rank's heads: n_head / tp query heads and kv_heads / tp key/value heads.
// Slots keep the model's names (c_attn, c_proj or q/k/v/o_proj), so paths and parameter names
// are unchanged. KV-cache decoding is not supported under tensor parallelism.
class TpSelfAttention : public Module {
 public:
  // The projections: column-parallel shards (q, k, v or fused c_attn) and the row-parallel
  // output projection.
  TpSelfAttention(const ModelConfig& cfg, const std::string& path, int tp_size,
                  std::vector<std::unique_ptr<Module>> column, std::unique_ptr<Module> out,
                  Communicator& tp, bool sequence_parallel = false);
  Tensor forward(const Tensor& x, MicroBatch& mb) override;
  Tensor backward(const Tensor& dy, MicroBatch& mb) override;
  Tensor infer(const Tensor& x, InferState& st) override;

 private:
  bool llama_;
  int64_t n_head_, n_kv_head_, head_dim_;  // local heads
  float rope_theta_;
  size_t out_slot_;
  Communicator& tp_;
  bool sp_;
};

// The MLP split on the hidden dimension: column-parallel c_fc (gate_proj, up_proj), row-parallel
// c_proj (down_proj).
class TpMLP : public Module {
 public:
  TpMLP(const ModelConfig& cfg, const std::string& path,
        std::vector<std::unique_ptr<Module>> column, std::unique_ptr<Module> out, Communicator& tp,
        bool sequence_parallel = false);
  Tensor forward(const Tensor& x, MicroBatch& mb) override;
  Tensor backward(const Tensor& dy, MicroBatch& mb) override;
  Tensor infer(const Tensor& x, InferState& st) override;

 private:
  bool llama_;
  Communicator& tp_;
  bool sp_;
};

// The token table split by vocabulary rows: rank r holds rows [r Vp/tp, (r+1) Vp/tp) of the
// padded table. A token outside the rank's rows contributes zero; the all-reduce assembles
// every row (sequence parallelism: the reduce-scatter gives each rank its slice of the
// sequences). The learned position table (GPT-2) is replicated and added by group rank 0.
// Host loops (OpenMP over rows or columns): a device kernel belongs in core/kernels when the GPU
// backend needs it.
class VocabParallelEmbedding : public Module {
 public:
  VocabParallelEmbedding(const std::string& path, Parameter wte, std::unique_ptr<Parameter> wpe,
                         int64_t vocab, int64_t row_begin, Communicator& tp,
                         bool sequence_parallel = false);
  Tensor forward(const Tensor& tokens, MicroBatch& mb) override;
  Tensor backward(const Tensor& dx, MicroBatch& mb) override;
  Tensor infer(const Tensor& tokens, InferState& st) override;
  void own_parameters(std::vector<Parameter*>& out) override;

  Parameter wte;
  std::unique_ptr<Parameter> wpe;

 private:
  int64_t vocab_, row_begin_;
  Communicator& tp_;
  bool sp_;
};

}  // namespace braid
