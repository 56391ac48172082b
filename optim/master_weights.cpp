// MasterWeights: f32 masters beside low-precision compute weights.
#include "optim/master_weights.h"

#include "core/kernels/elementwise.h"
#include "optim/adamw.h"

namespace braid {

MasterWeights::MasterWeights(ExecContext& ctx, const std::vector<Parameter*>& params, DType compute)
    : ctx_(ctx), compute_(compute), model_(params) {
  BRAID_CHECK(compute == DType::BF16 || compute == DType::F16,
              "MasterWeights: compute dtype {} is not bf16 or f16", dtype_name(compute));
  for (Parameter* p : model_) {
    BRAID_CHECK(p->value.dtype() == DType::F32, "MasterWeights: {} is {}, expected f32 values",
                p->name, p->value.str());
    Tensor master = ctx.empty(p->value.shape(), DType::F32, MemCategory::MasterWeights);
    cast(ctx, master, p->value);
    auto m = std::make_unique<Parameter>(p->name, master, p->trainable);
    m->global_shape = p->global_shape;
    m->shard = p->shard;
    m->replica = p->replica;
    Tensor low = ctx.empty(p->value.shape(), compute, MemCategory::Weights);
    cast(ctx, low, master);
    p->value = low;  // the f32 weights are released here (the master holds them)
    masters_.push_back(std::move(m));
  }
  bind_grads();
}

void MasterWeights::bind_grads() {
  for (size_t i = 0; i < model_.size(); ++i)
    if (model_[i]->trainable) masters_[i]->bind_grad(model_[i]->grad());
}

std::vector<Parameter*> MasterWeights::params() {
  std::vector<Parameter*> out;
  for (auto& m : masters_) out.push_back(m.get());
  return out;
}

std::vector<std::pair<std::string, Tensor>> MasterWeights::named_masters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& m : masters_)
    if (!m->replica) out.emplace_back(m->name, m->value);
  return out;
}

void MasterWeights::step(AdamW& opt, float lr) {
  bind_grads();
  opt.step(lr);
  refresh();
}

void MasterWeights::refresh() {
  for (size_t i = 0; i < model_.size(); ++i) cast(ctx_, model_[i]->value, masters_[i]->value);
}

}  // namespace braid
