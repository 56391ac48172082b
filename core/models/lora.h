// LoRA (Hu et al. 2021) as a pass over the model's named slots: target Linears are wrapped in
// LoraLinear, which keeps the Linear (frozen) in its `base` slot and adds trainable low-rank
// factors: y = base(x) + s * B A dropout(x), A (r, in), B (out, r), s = alpha / r (or
// alpha / sqrt(r) with rslora). Every parameter of the model other than A and B is frozen, so
// the base has no gradients, no optimizer state, no weight-gradient GEMMs and no place in a
// gradient bucket.
//
// Names: <linear path>.lora_A.weight / .lora_B.weight (the PEFT adapter file prefixes them
// with base_model.model.). Under tensor parallelism A and B follow the base layer's shard:
// a column-parallel base (weight split on dim 0, outputs) keeps A whole and splits B on its
// outputs (with the same fused blocks); a row-parallel base (split on dim 1, inputs) splits A
// on its inputs and keeps B whole.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/kernels/dropout.h"
#include "core/models/layers.h"
#include "core/models/lora_config.h"
#include "core/models/transformer.h"

namespace braid {

class LoraLinear final : public Module {
 public:
  LoraLinear(std::unique_ptr<Module> base, const LoraConfig& cfg);

  Tensor forward(const Tensor& x, MicroBatch& mb) override;  // x: (..., in) -> (..., out)
  Tensor backward(const Tensor& dy, MicroBatch& mb) override;
  Tensor infer(const Tensor& x, InferState& st) override;
  void own_parameters(std::vector<Parameter*>& out) override;

  Module& base() const { return *base_; }
  // Replaces the Linear base by a QuantizedLinear (core/models/quantized_linear.h) holding its
  // weight quantised; the full-precision weight is released. Before any placement.
  void quantize_base(ExecContext& ctx, BaseQuant kind, int64_t block, bool double_quant);
  float scale() const { return scale_; }
  // A kaiming-uniform (a = sqrt(5), as torch.nn.Linear and PEFT: U(-1/sqrt(in), 1/sqrt(in)))
  // from (seed, A's name), B zero. Values depend only on the seed and the name; a split A
  // (after place()) gets its part of the global draw.
  void init(uint64_t seed);

  Parameter lora_A;  // (r, in)
  Parameter lora_B;  // (out, r)

  // Placement (tensor parallelism), after the placement pass has split A and B like the base
  // (lora_a_shard / lora_b_shard): `part` is this rank's part of a split A (dropout window),
  // and two optional region modules (slots `rank_region`, `weight_grad_region`):
  // - rank_region runs on t = A x between A and B: a row-parallel base (inputs split) has a
  //   partial t, which its forward sums over the group (under sequence parallelism: sums and
  //   scatters to the base output's slice, and its backward gathers dt back to every position);
  // - weight_grad_region: a column-parallel base (outputs split) gives this rank's partial
  //   dt = s dy_r B_r. The input gradient takes it as it is (the enclosing input region sums
  //   the input gradients over the group); A's weight gradient takes it through this region's
  //   backward (the sum), so dA = dt^T x is whole on every rank.
  void place(int part, std::unique_ptr<Module> rank_region,
             std::unique_ptr<Module> weight_grad_region);

 private:
  // x, or dropout(x) with the micro-batch's mask when dropout is on and seed != 0. The mask is
  // the whole input's: a row-parallel base's rank draws its columns' part of it (window()).
  Tensor dropped(ExecContext& ctx, const Tensor& x, uint64_t seed) const;
  DropoutWindow window() const;
  // t = s * dropped(x) A^T (N, r) (through rank_region: mb for forward, st for infer), in
  // low_rank_dtype(x); y += t B^T. Returns t.
  DType low_rank_dtype(const Tensor& x) const;
  Tensor add_update(ExecContext& ctx, Tensor& y, const Tensor& xd, MicroBatch* mb,
                    InferState* st) const;

  Module* base_;
  float scale_, dropout_;
  uint64_t stream_;  // the dropout stream: a hash of the path
  int tp_part_ = 0;  // which part of a split A this rank holds (init, dropout window)
  Module* rank_region_ = nullptr;
  Module* weight_grad_region_ = nullptr;
};

// What the quantised LoRA bases of `model` hold: the codes, the constants (absmax values, or
// double quantisation's nested codes, their absmax values and offsets), in bytes, and how many
// weights they stand for.
struct QuantizedBaseBytes {
  int64_t codes = 0, constants = 0, weights = 0;
  int linears = 0;
};
QuantizedBaseBytes quantized_base_bytes(Transformer& model);

// True when the Linear at `path` is named by `targets` (its last path component, mapped: q ->
// q_proj, ..., c_attn, c_proj, c_fc, or all-linear).
bool lora_targets(const std::string& path, const std::vector<std::string>& targets);

// The shard specs of A and B for a base weight with spec `base`.
ShardSpec lora_a_shard(const ShardSpec& base);
ShardSpec lora_b_shard(const ShardSpec& base);

// The pass: wraps every target Linear, initialises the adapters and
// freezes everything else; refreshes the model's parameter list. Throws UserError when no
// Linear matches. Returns how many Linears it wrapped.
int apply_lora(Transformer& model, const LoraConfig& cfg, uint64_t seed);

// The QLoRA pass, after apply_lora: every LoraLinear's base weight is quantised as
// cfg.base_quant says (nothing for none). Returns how many bases it quantised.
int quantize_lora_bases(ExecContext& ctx, Transformer& model, const LoraConfig& cfg);

// The f32 weight a base `w` (f32 or bf16) computes as once quantize_lora_bases has quantised it
// as cfg says (codes, block size, double quantisation), read back whole: what merging adapters
// into a quantised base folds them into. cfg.base_quant must not be none.
Tensor quantized_base_readback(ExecContext& ctx, const Tensor& w, const LoraConfig& cfg);

}  // namespace braid
