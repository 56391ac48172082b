// MasterWeights: f32 masters beside low-precision compute weights.
#include "optim/master_weights.h"

#include "core/kernels/elementwise.h"
#include "optim/optimizer.h"

namespace braid {

MasterWeights::MasterWeights(ExecContext& ctx, const std::vector<Parameter*>& params, DType compute)
    : ctx_(ctx), compute_(compute), model_(params) {
  BRAID_CHECK(compute == DType::BF16 || compute == DType::F16,
              "MasterWeights: compute dtype {} is not bf16 or f16", dtype_name(compute));
  for (Parameter* p : model_) {
    if (!p->trainable && p->value.dtype() == compute) {  // a frozen base read in 16 bits
      masters_.push_back(nullptr);
      continue;
    }
    BRAID_CHECK(p->value.dtype() == DType::F32, "MasterWeights: {} is {}, expected f32 values",
                p->name, p->value.str());
    std::unique_ptr<Parameter> m;
    if (p->trainable) {
      Tensor master = ctx.empty(p->value.shape(), DType::F32, MemCategory::MasterWeights);
      cast(ctx, master, p->value);
      m = std::make_unique<Parameter>(p->name, master, true);
      m->global_shape = p->global_shape;
      m->shard = p->shard;
      m->replica = p->replica;
    }
    Tensor low = ctx.empty(p->value.shape(), compute, MemCategory::Weights);
    cast(ctx, low, p->value);
    p->value = low;  // the f32 weights are released here (the master holds them, if any)
    masters_.push_back(std::move(m));
  }
  bind_grads();
}

void MasterWeights::bind_grads() {
  for (size_t i = 0; i < model_.size(); ++i)
    if (masters_[i]) {
      masters_[i]->bind_grad(model_[i]->grad());
      masters_[i]->rounded_copy = model_[i]->value;
    }
}

std::vector<Parameter*> MasterWeights::params() {
  std::vector<Parameter*> out;
  for (auto& m : masters_)
    if (m) out.push_back(m.get());
  return out;
}

std::vector<std::pair<std::string, Tensor>> MasterWeights::named_masters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t i = 0; i < model_.size(); ++i) {
    const Parameter* p = model_[i];
    if (p->replica) continue;
    if (masters_[i]) {
      out.emplace_back(p->name, masters_[i]->value);
    } else {
      // Frozen: the 16-bit value itself, no f32 copy on the device (a LoRA base is most of the
      // model); the checkpoint writer widens it on the host, one tensor at a time
      // (CheckpointFile::widen_16bit). bf16/f16 -> f32 is exact, so a resume rounds back to the
      // same value.
      out.emplace_back(p->name, p->value);
    }
  }
  return out;
}

void MasterWeights::load(const std::function<Tensor(const std::string&)>& get) {
  for (size_t i = 0; i < model_.size(); ++i) {
    // A checkpoint's tensors are read into host memory; a GPU run's kernels need them there.
    const Tensor src = ctx_.to_device(get(model_[i]->name), MemCategory::Other);
    if (masters_[i])
      masters_[i]->value.copy_from(src);
    else
      cast(ctx_, model_[i]->value, src);
  }
  refresh();
}

void MasterWeights::step(Optimizer& opt, float lr) {
  bind_grads();
  opt.step(lr);
  if (!opt.updates_rounded_copies()) refresh();
}

void MasterWeights::refresh() {
  for (size_t i = 0; i < model_.size(); ++i)
    if (masters_[i]) cast(ctx_, model_[i]->value, masters_[i]->value);
}

}  // namespace braid
