// AdamW, the LR schedule and gradient clipping.
#include "optim/adamw.h"

#include <cmath>

#include "core/kernels/elementwise.h"
#include "core/profile.h"
#include "parallel/tensor_parallel.h"

namespace braid {

AdamW::AdamW(ExecContext& ctx, std::vector<Parameter*> params, const OptimConfig& cfg,
             const ModelGroups& groups)
    : ctx_(ctx), groups_(groups), cfg_(cfg) {
  cfg_.validate();
  const bool eight_bit = cfg_.name == "adamw8bit";
  for (Parameter* p : params) {
    if (!p->trainable) continue;  // frozen parameters have no optimizer state
    Slot s{p, {}, {}, {}, {}, {}, {}, decays(*p)};
    const int64_t n = p->value.numel();
    if (eight_bit && n >= kAdam8bitMinNumel) {
      // All-zero codes with absmax 0 dequantise to zero moments.
      const Shape blocks{adamw8bit_blocks(n)};
      s.m_codes = ctx.zeros(p->value.shape(), DType::U8, MemCategory::OptimizerState);
      s.v_codes = ctx.zeros(p->value.shape(), DType::U8, MemCategory::OptimizerState);
      s.m_absmax = ctx.zeros(blocks, DType::F32, MemCategory::OptimizerState);
      s.v_absmax = ctx.zeros(blocks, DType::F32, MemCategory::OptimizerState);
    } else {
      s.m = ctx.zeros(p->value.shape(), DType::F32, MemCategory::OptimizerState);
      s.v = ctx.zeros(p->value.shape(), DType::F32, MemCategory::OptimizerState);
    }
    slots_.push_back(std::move(s));
    trainable_.push_back(p);
  }
}

double AdamW::grad_norm() {
  KernelTimer timer(ctx_.profiler(), KernelGroup::Optimizer);
  return model_parallel_grad_norm(ctx_, trainable_, groups_.tp, groups_.pp);
}

void AdamW::scale_grads(float s) {
  for (Slot& slot : slots_) scale_inplace(ctx_, slot.p->grad(), s);
}

void AdamW::clip(double norm, float max_norm) { grad_scale_ *= clip_factor(norm, max_norm); }

std::vector<Tensor> AdamW::grads() const {
  std::vector<Tensor> out;
  for (const Slot& s : slots_) out.push_back(s.p->grad());
  return out;
}

bool AdamW::decays(const Parameter& p) const { return adamw_decays(p, cfg_); }

bool adamw_decays(const Parameter& p, const OptimConfig& cfg) {
  if (p.value.ndim() < 2) return false;
  for (const std::string& pat : cfg.no_decay)
    if (!pat.empty() && p.name.find(pat) != std::string::npos) return false;
  return true;
}

void AdamW::step(float lr) {
  KernelTimer timer(ctx_.profiler(), KernelGroup::Optimizer);
  ++t_;
  AdamWStep k = adamw_step_constants(cfg_, t_, lr);
  k.grad_scale = grad_scale_;  // the clip, inside the update
  grad_scale_ = 1.0f;
  for (Slot& s : slots_) {
    k.decay = s.decay ? lr * cfg_.weight_decay : 0.0f;
    Tensor& low = s.p->rounded_copy;
    if (s.eight_bit()) {
      adamw8bit_update(ctx_, s.p->value, s.m_codes, s.m_absmax, s.v_codes, s.v_absmax, s.p->grad(),
                       k);
      if (low.defined()) cast(ctx_, low, s.p->value);
    } else {
      adamw_update(ctx_, s.p->value, s.m, s.v, s.p->grad(), k, low.defined() ? &low : nullptr);
    }
  }
}

std::vector<std::pair<std::string, Tensor>> AdamW::state_tensors() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const Slot& s : slots_) {
    if (s.eight_bit()) {
      out.emplace_back(s.p->name + ".exp_avg_codes", s.m_codes);
      out.emplace_back(s.p->name + ".exp_avg_absmax", s.m_absmax);
      out.emplace_back(s.p->name + ".exp_avg_sq_codes", s.v_codes);
      out.emplace_back(s.p->name + ".exp_avg_sq_absmax", s.v_absmax);
      continue;
    }
    out.emplace_back(s.p->name + ".exp_avg", s.m);
    out.emplace_back(s.p->name + ".exp_avg_sq", s.v);
  }
  return out;
}

NamedTensors AdamW::state_tensors(nlohmann::json* /*pieces*/) const { return state_tensors(); }

void AdamW::load_state(const std::function<Tensor(const std::string&)>& get, int64_t steps_taken) {
  // The names state_tensors gives (8-bit slots: codes and absmax), whatever the slot holds.
  for (Slot& s : slots_) {
    if (s.eight_bit()) {
      s.m_codes.copy_from(get(s.p->name + ".exp_avg_codes"));
      s.m_absmax.copy_from(get(s.p->name + ".exp_avg_absmax"));
      s.v_codes.copy_from(get(s.p->name + ".exp_avg_sq_codes"));
      s.v_absmax.copy_from(get(s.p->name + ".exp_avg_sq_absmax"));
      continue;
    }
    s.m.copy_from(get(s.p->name + ".exp_avg"));
    s.v.copy_from(get(s.p->name + ".exp_avg_sq"));
  }
  t_ = steps_taken;
}

AdamWStep adamw_step_constants(const OptimConfig& cfg, int64_t t, float lr) {
  auto correction = [t](float beta) {
    return 1.0f - static_cast<float>(std::pow(static_cast<double>(beta), static_cast<double>(t)));
  };
  const float bc1 = correction(cfg.beta1), bc2 = correction(cfg.beta2);
  return {cfg.beta1, cfg.beta2, cfg.eps, lr / bc1, 1.0f / std::sqrt(bc2), 0.0f};
}

float lr_at(const OptimConfig& cfg, int64_t step, int64_t total_steps) {
  if (step < cfg.warmup_steps)
    return cfg.lr * static_cast<float>(step + 1) / static_cast<float>(cfg.warmup_steps);
  if (cfg.decay == "constant") return cfg.lr;
  const int64_t end = cfg.decay_steps > 0 ? cfg.decay_steps : total_steps;
  if (step >= end || end <= cfg.warmup_steps) return cfg.min_lr;
  const double progress =
      static_cast<double>(step - cfg.warmup_steps) / static_cast<double>(end - cfg.warmup_steps);
  const double coeff =
      cfg.decay == "cosine" ? 0.5 * (1.0 + std::cos(M_PI * progress)) : 1.0 - progress;
  return static_cast<float>(cfg.min_lr + coeff * (cfg.lr - cfg.min_lr));
}

double global_grad_norm(ExecContext& ctx, const std::vector<Parameter*>& params) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Optimizer);
  std::vector<Tensor> grads;
  for (Parameter* p : params)
    if (p->trainable) grads.push_back(p->grad());
  double sq = 0.0;
  for (double q : sum_squares_each(ctx, grads)) sq += q;  // in parameter order, as before
  return std::sqrt(sq);
}

float clip_factor(double norm, float max_norm) {
  if (max_norm <= 0.0f || !(norm > max_norm)) return 1.0f;
  return static_cast<float>(max_norm / (norm + 1e-6));
}

float clip_grad_norm(ExecContext& ctx, const std::vector<Parameter*>& params, double norm,
                     float max_norm) {
  KernelTimer timer(ctx.profiler(), KernelGroup::Optimizer);
  const float scale = clip_factor(norm, max_norm);
  if (scale == 1.0f) return 1.0f;
  for (Parameter* p : params)
    if (p->trainable) scale_inplace(ctx, p->grad(), scale);
  return scale;
}

}  // namespace braid
