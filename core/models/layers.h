// Leaf layers with parameters: Linear, LayerNorm, RMSNorm, token/position Embedding.
#pragma once

#include <memory>
#include <string>

#include "core/module.h"

namespace braid {

// y = x W^T + b over the last dimension. weight: (out, in), torch.nn.Linear layout. The sizes
// are the weight's: a placement that keeps only some rows (outputs) or columns (inputs) of it
// (tensor parallelism) needs nothing else from the layer.
//
// A linear whose weight holds only some input columns computes a partial sum: reduce_output()
// gives it the module that completes the sum (a collective, in its `output_region` slot). Its
// output is then the f32 partial sum (bias added only where add_bias says, so that it is added
// once), passed through the region and rounded once to x's dtype; its backward passes dy back
// through the region before the GEMMs.
class Linear : public Module {
 public:
  // path: "transformer.h.0.attn.c_attn" -> parameters path.weight, path.bias
  Linear(ExecContext& ctx, const std::string& path, int64_t in_features, int64_t out_features,
         bool bias);

  Tensor forward(const Tensor& x, MicroBatch& mb) override;  // x: (..., in) -> (..., out)
  // dx now; the weight gradient inline or, when mb defers weight gradients, queued on mb.
  Tensor backward(const Tensor& dy, MicroBatch& mb) override;  // dy: (..., out) -> (..., in)
  Tensor infer(const Tensor& x, InferState& st) override;
  void own_parameters(std::vector<Parameter*>& out) override;

  int64_t in_features() const { return weight.value.dim(1); }
  int64_t out_features() const { return weight.value.dim(0); }
  // Makes the output a partial sum completed by `region` (see above). Once per layer.
  void reduce_output(std::unique_ptr<Module> region, bool add_bias);
  bool reduces_output() const { return region_ != nullptr; }
  // Hands the output region (null when none) to a layer replacing this one; *add_bias says
  // whether the bias goes into the partial sum (this rank adds it).
  std::unique_ptr<Module> take_output_region(bool* add_bias);

  Parameter weight;
  std::unique_ptr<Parameter> bias;  // null when the layer has none

 private:
  // x W^T (+ b): in x's dtype, or the f32 partial sum when the output is reduced.
  Tensor product(ExecContext& ctx, const Tensor& x) const;
  Module* region_ = nullptr;  // the output_region slot, when reduced
  bool bias_in_partial_ = true;
};

// The backward of y = x W^T + b for any linear layer (Linear, the tensor-parallel ones): dx
// now, and the trainable weight's and bias's gradients computed, or queued on mb when it
// defers weight gradients, then reported ready (bias, then weight). x and dy: (..., in) and
// (..., out), as the forward saw them.
Tensor linear_layer_backward(MicroBatch& mb, const Tensor& x, const Tensor& dy, Parameter& weight,
                             Parameter* bias);

// True for Linear (the usual target of passes: LoRA, tensor parallelism, counting wrappers).
bool is_linear(const Module& m);

class LayerNorm : public Module {
 public:
  LayerNorm(ExecContext& ctx, const std::string& path, int64_t dim, float eps);
  Tensor forward(const Tensor& x, MicroBatch& mb) override;  // x: (..., C)
  Tensor backward(const Tensor& dy, MicroBatch& mb) override;
  Tensor infer(const Tensor& x, InferState& st) override;
  void own_parameters(std::vector<Parameter*>& out) override;

  Parameter weight, bias;
  float eps;

 private:
  Tensor run(ExecContext& ctx, const Tensor& x, Tensor& mean, Tensor& rstd) const;
};

class RMSNorm : public Module {
 public:
  RMSNorm(ExecContext& ctx, const std::string& path, int64_t dim, float eps);
  Tensor forward(const Tensor& x, MicroBatch& mb) override;  // x: (..., C)
  Tensor backward(const Tensor& dy, MicroBatch& mb) override;
  Tensor infer(const Tensor& x, InferState& st) override;
  void own_parameters(std::vector<Parameter*>& out) override;

  Parameter weight;
  float eps;

 private:
  Tensor run(ExecContext& ctx, const Tensor& x, Tensor& rstd) const;
};

// Token embedding plus an optional learned position table (GPT-2's wpe lives here too: one
// kernel adds both). Input: token ids (B, T) i32; output (B, T, C). backward returns an
// undefined tensor (nothing comes before it). infer starts at position st.pos.
//
// A table holding only rows [row_begin, row_begin + rows) of the vocabulary (tensor
// parallelism: shard_rows()) looks up the tokens it holds, adds the positions where
// add_positions says (once over the group), and its f32 partial output is completed by the
// region module in its `output_region` slot, then rounded once to the table's dtype.
class Embedding : public Module {
 public:
  Embedding(ExecContext& ctx, const std::string& path, const std::string& token_name, int64_t vocab,
            int64_t dim, const std::string& position_name, int64_t positions);
  Tensor forward(const Tensor& tokens, MicroBatch& mb) override;
  Tensor backward(const Tensor& dx, MicroBatch& mb) override;
  Tensor infer(const Tensor& tokens, InferState& st) override;
  void own_parameters(std::vector<Parameter*>& out) override;

  // wte holds rows [row_begin, row_begin + wte rows) of a vocabulary of `vocab` real tokens
  // (rows past it are padding). Once per layer.
  void shard_rows(int64_t row_begin, int64_t vocab, bool add_positions,
                  std::unique_ptr<Module> region);

  Parameter wte;
  std::unique_ptr<Parameter> wpe;  // null without learned positions

 private:
  // The lookup at positions [pos, pos + T): the table's dtype, or the f32 partial when sharded.
  // With sample_starts (packed samples, MicroBatch::sample_starts) each sample's positions
  // start at 0 instead.
  Tensor lookup(ExecContext& ctx, const Tensor& tokens, int64_t pos,
                const Tensor& sample_starts) const;
  Module* region_ = nullptr;  // set by shard_rows
  int64_t row_begin_ = 0, vocab_ = 0;
  bool add_positions_ = true;
};

// Flattens all leading dimensions: (..., C) -> (N, C).
Tensor as_rows(const Tensor& x);
// The f32 sum `t` (a reduced partial product) rounded once to `dtype` (t when it already is).
Tensor rounded(ExecContext& ctx, const Tensor& t, DType dtype);

// A fresh parameter tensor (MemCategory::Weights) on ctx filled with `value`; a meta tensor
// (no memory) while a DeferredWeights is alive on this thread.
Tensor weight_tensor(ExecContext& ctx, const Shape& shape, float value = 0.0f);

// While alive, modules built on this thread get meta parameter tensors: a model whose weights
// are read later, tensor by tensor (launch/train/model_passes.h's build_from_lora_base), so
// that the whole model in f32 is never held while its base is quantised.
class DeferredWeights {
 public:
  DeferredWeights();
  ~DeferredWeights();
  DeferredWeights(const DeferredWeights&) = delete;
  DeferredWeights& operator=(const DeferredWeights&) = delete;
};

}  // namespace braid
