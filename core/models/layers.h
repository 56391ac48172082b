// Leaf layers with parameters: Linear, LayerNorm, RMSNorm, token/position Embedding.
#pragma once

#include <memory>
#include <string>

#include "core/module.h"

namespace braid {

// y = x W^T + b over the last dimension. weight: (out, in), torch.nn.Linear layout.
class Linear : public Module {
 public:
  // prefix: "transformer.h.0.attn.c_attn" -> parameters prefix.weight, prefix.bias
  Linear(const std::string& prefix, int64_t in_features, int64_t out_features, bool bias);

  Tensor forward(const Tensor& x, Saved& saved) override;   // x: (..., in) -> (..., out)
  Tensor backward(const Tensor& dy, Saved& saved) override;  // dy: (..., out) -> (..., in)
  void collect_parameters(std::vector<Parameter*>& out) override;
  Tensor infer(const Tensor& x) const;  // forward without saving anything

  Parameter weight;
  std::unique_ptr<Parameter> bias;  // null when the layer has none
  int64_t in_features, out_features;
};

// A normalisation layer: also usable without saving anything (inference).
class Norm : public Module {
 public:
  virtual Tensor infer(const Tensor& x) const = 0;
};

class LayerNorm : public Norm {
 public:
  LayerNorm(const std::string& prefix, int64_t dim, float eps);
  Tensor forward(const Tensor& x, Saved& saved) override;  // x: (..., C)
  Tensor backward(const Tensor& dy, Saved& saved) override;
  void collect_parameters(std::vector<Parameter*>& out) override;
  Tensor infer(const Tensor& x) const override;

  Parameter weight, bias;
  float eps;

 private:
  Tensor run(const Tensor& x, Tensor& mean, Tensor& rstd) const;  // y; fills mean, rstd: (N)
};

class RMSNorm : public Norm {
 public:
  RMSNorm(const std::string& prefix, int64_t dim, float eps);
  Tensor forward(const Tensor& x, Saved& saved) override;  // x: (..., C)
  Tensor backward(const Tensor& dy, Saved& saved) override;
  void collect_parameters(std::vector<Parameter*>& out) override;
  Tensor infer(const Tensor& x) const override;

  Parameter weight;
  float eps;

 private:
  Tensor run(const Tensor& x, Tensor& rstd) const;  // y; fills rstd: (N)
};

// Token embedding plus an optional learned position table. Input: token ids (B, T) i32.
class Embedding {
 public:
  Embedding(const std::string& token_name, int64_t vocab, int64_t dim,
            const std::string& position_name, int64_t positions);
  // out: (B, T, C); pos_offset is the absolute position of column 0 (KV-cache decoding).
  Tensor forward(const Tensor& tokens, Saved& saved, int64_t pos_offset = 0);
  void backward(const Tensor& dx, Saved& saved);
  void collect_parameters(std::vector<Parameter*>& out);
  Tensor infer(const Tensor& tokens, int64_t pos_offset) const;

  Parameter wte;
  std::unique_ptr<Parameter> wpe;  // null without learned positions
};

// Flattens all leading dimensions: (..., C) -> (N, C).
Tensor as_rows(const Tensor& x);

}  // namespace braid
