// The MLP's activation function as a slot (GPT-2 `mlp.act`: GELU; Llama `mlp.act_fn`: SwiGLU
// over gate and up), so a pass can replace it (selective activation checkpointing) without
// the MLP knowing. Parameter-free.
#pragma once

#include <memory>

#include "core/module.h"

namespace braid {

class ActivationFn : public Module {
 public:
  using Module::Module;
  // y = act(a) (GELU, b undefined) or silu(a) * b (SwiGLU). a, b, y: (B, T, F)
  virtual Tensor apply(ExecContext& ctx, const Tensor& a, const Tensor& b) = 0;
  // apply, keeping what backward2 needs on mb.
  virtual Tensor forward2(const Tensor& a, const Tensor& b, MicroBatch& mb) = 0;
  // da from dy (returned; may reuse dy's memory), and db for SwiGLU.
  virtual Tensor backward2(const Tensor& dy, MicroBatch& mb, Tensor* db) = 0;

  // Whether forward2 must leave its inputs unchanged because something recomputes from them
  // later (selective checkpointing). Otherwise GELU overwrites its input with what its backward
  // needs.
  void set_keeps_inputs(bool keep) { keeps_inputs_ = keep; }
  bool keeps_inputs() const { return keeps_inputs_; }

  // The one-input Module interface (GELU).
  Tensor forward(const Tensor& x, MicroBatch& mb) override { return forward2(x, Tensor(), mb); }
  Tensor backward(const Tensor& dy, MicroBatch& mb) override { return backward2(dy, mb, nullptr); }
  Tensor infer(const Tensor& x, InferState& st) override { return apply(st.ctx, x, Tensor()); }

 private:
  bool keeps_inputs_ = false;
};

// GELU keeps gelu'(a) for its backward, written over its input a (one exp per element in the
// forward, a multiply in the backward); with keeps_inputs() it keeps a and recomputes the
// derivative in the backward instead.
class Gelu final : public ActivationFn {
 public:
  using ActivationFn::ActivationFn;
  Tensor apply(ExecContext& ctx, const Tensor& a, const Tensor& b) override;
  Tensor forward2(const Tensor& a, const Tensor& b, MicroBatch& mb) override;
  Tensor backward2(const Tensor& dy, MicroBatch& mb, Tensor* db) override;
};

class SwiGlu final : public ActivationFn {
 public:
  using ActivationFn::ActivationFn;
  Tensor apply(ExecContext& ctx, const Tensor& gate, const Tensor& up) override;
  Tensor forward2(const Tensor& gate, const Tensor& up, MicroBatch& mb) override;
  Tensor backward2(const Tensor& dy, MicroBatch& mb, Tensor* dup) override;
};

}  // namespace braid
