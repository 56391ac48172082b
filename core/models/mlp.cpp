// MLP forward/backward for both families.
#include "core/models/mlp.h"

#include "core/kernels/activation.h"
#include "core/kernels/elementwise.h"

namespace braid {

MLP::MLP(const ModelConfig& cfg, const std::string& prefix) : llama_(cfg.is_llama()) {
  const int64_t C = cfg.n_embd, F = cfg.ffn();
  if (llama_) {
    gate_proj = std::make_unique<Linear>(prefix + ".gate_proj", C, F, false);
    up_proj = std::make_unique<Linear>(prefix + ".up_proj", C, F, false);
    down_proj = std::make_unique<Linear>(prefix + ".down_proj", F, C, false);
  } else {
    c_fc = std::make_unique<Linear>(prefix + ".c_fc", C, F, true);
    c_proj = std::make_unique<Linear>(prefix + ".c_proj", F, C, true);
  }
}

Tensor MLP::forward(const Tensor& x, Saved& saved) {
  if (llama_) {
    Tensor gate = gate_proj->forward(x, saved);  // (B, T, F)
    Tensor up = up_proj->forward(x, saved);
    Tensor h = Tensor::empty(gate.shape());
    Tensor h2 = as_rows(h);
    swiglu_forward(h2, as_rows(gate), as_rows(up));
    saved.push(gate);
    saved.push(up);
    return down_proj->forward(h, saved);
  }
  Tensor pre = c_fc->forward(x, saved);  // (B, T, F)
  Tensor act = Tensor::empty(pre.shape());
  gelu_forward(act, pre);
  saved.push(pre);
  return c_proj->forward(act, saved);
}

Tensor MLP::backward(const Tensor& dy, Saved& saved) {
  if (llama_) {
    Tensor dh = down_proj->backward(dy, saved);
    Tensor up = saved.pop(), gate = saved.pop();
    Tensor dgate = Tensor::empty(gate.shape()), dup = Tensor::empty(up.shape());
    Tensor dgate2 = as_rows(dgate), dup2 = as_rows(dup);
    swiglu_backward(dgate2, dup2, as_rows(dh), as_rows(gate), as_rows(up));
    Tensor dx = up_proj->backward(dup, saved);
    add_inplace(dx, gate_proj->backward(dgate, saved));
    return dx;
  }
  Tensor dact = c_proj->backward(dy, saved);
  Tensor pre = saved.pop();
  gelu_backward(dact, dact, pre);  // in place: dact becomes dpre
  return c_fc->backward(dact, saved);
}

Tensor MLP::infer(const Tensor& x) {
  if (llama_) {
    Tensor gate = gate_proj->infer(x), up = up_proj->infer(x);
    Tensor h = Tensor::empty(gate.shape());
    Tensor h2 = as_rows(h);
    swiglu_forward(h2, as_rows(gate), as_rows(up));
    return down_proj->infer(h);
  }
  Tensor h = c_fc->infer(x);
  gelu_forward(h, h);
  return c_proj->infer(h);
}

void MLP::collect_parameters(std::vector<Parameter*>& out) {
  if (llama_) {
    gate_proj->collect_parameters(out);
    up_proj->collect_parameters(out);
    down_proj->collect_parameters(out);
  } else {
    c_fc->collect_parameters(out);
    c_proj->collect_parameters(out);
  }
}

}  // namespace braid
