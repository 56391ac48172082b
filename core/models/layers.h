// Leaf layers with parameters: Linear, LayerNorm, RMSNorm, token/position Embedding.
#pragma once

#include <memory>
#include <string>

#include "core/module.h"

namespace braid {

// y = x W^T + b over the last dimension. weight: (out, in), torch.nn.Linear layout.
// A module computing y = x W^T (+ b) with the weight linear_weight(): Linear, and the
// tensor-parallel row-parallel linear of parallel/. What LoRA wraps.
class LinearLike {
 public:
  virtual ~LinearLike() = default;
  virtual Parameter& linear_weight() = 0;
};

class Linear : public Module, public LinearLike {
 public:
  // path: "transformer.h.0.attn.c_attn" -> parameters path.weight, path.bias
  Linear(ExecContext& ctx, const std::string& path, int64_t in_features, int64_t out_features,
         bool bias);

  Tensor forward(const Tensor& x, MicroBatch& mb) override;  // x: (..., in) -> (..., out)
  // dx now; the weight gradient inline or, when mb defers weight gradients, queued on mb.
  Tensor backward(const Tensor& dy, MicroBatch& mb) override;  // dy: (..., out) -> (..., in)
  Tensor infer(const Tensor& x, InferState& st) override;
  void own_parameters(std::vector<Parameter*>& out) override;
  Parameter& linear_weight() override { return weight; }

  Parameter weight;
  std::unique_ptr<Parameter> bias;  // null when the layer has none
  int64_t in_features, out_features;

 private:
  Tensor run(ExecContext& ctx, const Tensor& x) const;
};

// The backward of y = x W^T + b for any linear layer (Linear, the tensor-parallel ones): dx
// now, and the trainable weight's and bias's gradients computed, or queued on mb when it
// defers weight gradients, then reported ready (bias, then weight). x and dy: (..., in) and
// (..., out), as the forward saw them.
Tensor linear_layer_backward(MicroBatch& mb, const Tensor& x, const Tensor& dy, Parameter& weight,
                             Parameter* bias);

// True for Linear (the usual target of passes: LoRA, tensor parallelism, counting wrappers).
bool is_linear(const Module& m);
// True for any LinearLike module (Linear, or a tensor-parallel linear): what LoRA can wrap.
bool is_linear_like(const Module& m);

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
class Embedding : public Module {
 public:
  Embedding(ExecContext& ctx, const std::string& path, const std::string& token_name, int64_t vocab,
            int64_t dim, const std::string& position_name, int64_t positions);
  Tensor forward(const Tensor& tokens, MicroBatch& mb) override;
  Tensor backward(const Tensor& dx, MicroBatch& mb) override;
  Tensor infer(const Tensor& tokens, InferState& st) override;
  void own_parameters(std::vector<Parameter*>& out) override;

  Parameter wte;
  std::unique_ptr<Parameter> wpe;  // null without learned positions
};

// Flattens all leading dimensions: (..., C) -> (N, C).
Tensor as_rows(const Tensor& x);

// A fresh parameter tensor (MemCategory::Weights) on ctx.
Tensor weight_tensor(ExecContext& ctx, const Shape& shape);

}  // namespace braid
