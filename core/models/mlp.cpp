// MLP forward/backward for both families. Slots: llama gate_proj, up_proj, down_proj, act_fn;
// gpt2 c_fc, c_proj, act.
#include "core/models/mlp.h"

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
    add_slot("act_fn", std::make_unique<SwiGlu>(path + ".act_fn"));
  } else {
    linear("c_fc", C, F, true);
    linear("c_proj", F, C, true);
    add_slot("act", std::make_unique<Gelu>(path + ".act"));
  }
}

ActivationFn& MLP::act() const {
  auto* a = dynamic_cast<ActivationFn*>(&child(llama_ ? 3 : 2));
  BRAID_CHECK(a, "{}: the activation slot holds no ActivationFn", path());
  return *a;
}

void MLP::set_input_region(std::unique_ptr<Module> region) {
  BRAID_CHECK(!region_, "{}: the input region is already set", path());
  region_ = &child(add_slot("input_region", std::move(region)));
}

Tensor MLP::forward(const Tensor& x_in, MicroBatch& mb) {
  const Tensor x = region_ ? region_->forward(x_in, mb) : x_in;
  if (llama_) {
    Tensor gate = child(0).forward(x, mb);  // (B, T, F)
    Tensor up = child(1).forward(x, mb);
    Tensor h = act().forward2(gate, up, mb);
    return child(2).forward(h, mb);
  }
  Tensor pre = child(0).forward(x, mb);  // (B, T, F)
  Tensor a = act().forward2(pre, Tensor(), mb);
  return child(1).forward(a, mb);
}

Tensor MLP::backward(const Tensor& dy, MicroBatch& mb) {
  ExecContext& ctx = mb.ctx();
  Tensor dx;
  if (llama_) {
    Tensor dh = child(2).backward(dy, mb);
    Tensor dup;
    Tensor dgate = act().backward2(dh, mb, &dup);
    dx = child(1).backward(dup, mb);
    add_inplace(ctx, dx, child(0).backward(dgate, mb));
  } else {
    Tensor dact = child(1).backward(dy, mb);
    Tensor dpre = act().backward2(dact, mb, nullptr);
    dx = child(0).backward(dpre, mb);
  }
  return region_ ? region_->backward(dx, mb) : dx;
}

Tensor MLP::infer(const Tensor& x_in, InferState& st) {
  const Tensor x = region_ ? region_->infer(x_in, st) : x_in;
  if (llama_) {
    Tensor gate = child(0).infer(x, st), up = child(1).infer(x, st);
    return child(2).infer(act().apply(st.ctx, gate, up), st);
  }
  Tensor h = child(0).infer(x, st);
  return child(1).infer(act().apply(st.ctx, h, Tensor()), st);
}

}  // namespace braid
