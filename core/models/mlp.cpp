// MLP forward/backward for both families. Slots: llama gate_proj, up_proj, down_proj; gpt2
// c_fc, c_proj.
#include "core/models/mlp.h"

#include "core/kernels/activation.h"
#include "core/kernels/elementwise.h"

namespace braid {

MLP::MLP(ExecContext& ctx, const ModelConfig& cfg, const std::string& path)
    : Module(path), llama_(cfg.is_llama()) {
  const int64_t C = cfg.n_embd, F = cfg.ffn();
  auto linear = [&](const char* name, int64_t in, int64_t out, bool bias) {
    add_slot(name, std::make_unique<Linear>(ctx, path + "." + name, in, out, bias));
  };
  if (llama_) {
    linear("gate_proj", C, F, false);
    linear("up_proj", C, F, false);
    linear("down_proj", F, C, false);
  } else {
    linear("c_fc", C, F, true);
    linear("c_proj", F, C, true);
  }
}

Tensor MLP::forward(const Tensor& x, MicroBatch& mb) {
  ExecContext& ctx = mb.ctx();
  if (llama_) {
    Tensor gate = child(0).forward(x, mb);  // (B, T, F)
    Tensor up = child(1).forward(x, mb);
    Tensor h = empty_like(gate);
    Tensor h2 = as_rows(h);
    swiglu_forward(ctx, h2, as_rows(gate), as_rows(up));
    mb.push(gate);
    mb.push(up);
    return child(2).forward(h, mb);
  }
  Tensor pre = child(0).forward(x, mb);  // (B, T, F)
  Tensor act = empty_like(pre);
  gelu_forward(ctx, act, pre);
  mb.push(pre);
  return child(1).forward(act, mb);
}

Tensor MLP::backward(const Tensor& dy, MicroBatch& mb) {
  ExecContext& ctx = mb.ctx();
  if (llama_) {
    Tensor dh = child(2).backward(dy, mb);
    Tensor up = mb.pop(), gate = mb.pop();
    Tensor dgate = empty_like(gate), dup = empty_like(up);
    Tensor dgate2 = as_rows(dgate), dup2 = as_rows(dup);
    swiglu_backward(ctx, dgate2, dup2, as_rows(dh), as_rows(gate), as_rows(up));
    Tensor dx = child(1).backward(dup, mb);
    add_inplace(ctx, dx, child(0).backward(dgate, mb));
    return dx;
  }
  Tensor dact = child(1).backward(dy, mb);
  Tensor pre = mb.pop();
  gelu_backward(ctx, dact, dact, pre);  // in place: dact becomes dpre
  return child(0).backward(dact, mb);
}

Tensor MLP::infer(const Tensor& x, InferState& st) {
  ExecContext& ctx = st.ctx;
  if (llama_) {
    Tensor gate = child(0).infer(x, st), up = child(1).infer(x, st);
    Tensor h = empty_like(gate);
    Tensor h2 = as_rows(h);
    swiglu_forward(ctx, h2, as_rows(gate), as_rows(up));
    return child(2).infer(h, st);
  }
  Tensor h = child(0).infer(x, st);
  gelu_forward(ctx, h, h);
  return child(1).infer(h, st);
}

}  // namespace braid
