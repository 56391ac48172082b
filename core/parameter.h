// Parameter: a named trainable (or frozen) tensor with its gradient.
#pragma once

#include <string>

#include "core/tensor.h"

namespace braid {

struct Parameter {
  // HF-compatible name, e.g. transformer.h.3.attn.c_attn.weight; checkpoints and HF
  // import/export are driven by it.
  std::string name;
  Tensor value;  // MemCategory::Weights
  Tensor grad;   // MemCategory::Grads, same shape; undefined when frozen
  bool trainable = true;
  // Tensor-parallel sharding (part 3): the dimension split across TP ranks, -1 = replicated.
  int shard_dim = -1;

  Parameter(std::string n, const Shape& shape, bool trainable_ = true);
  void zero_grad();
};

}  // namespace braid
