// ZeroAdamW: sharded moments, shard updates and the parameter all-gather.
#include "launch/zero_adamw.h"

#include <algorithm>
#include <cmath>

#include "core/kernels/elementwise.h"
#include "core/kernels/optimizer.h"
#include "core/profile.h"
#include "optim/adamw.h"
#include "parallel/scalar_reduce.h"

namespace braid {

ZeroAdamW::ZeroAdamW(ExecContext& ctx, GradBuckets& buckets, const OptimConfig& cfg, DType compute)
    : ctx_(ctx), buckets_(buckets), cfg_(cfg), compute_(compute) {
  cfg_.validate();
  BRAID_CHECK(buckets.options().reduce_scatter, "ZeroAdamW needs reduce-scatter buckets");
  BRAID_CHECK(compute == DType::F32 || compute == DType::BF16 || compute == DType::F16,
              "ZeroAdamW: compute dtype {} is not f32, bf16 or f16", dtype_name(compute));
  const bool mixed = low_precision();
  const auto& bs = buckets.buckets();
  for (size_t b = 0; b < bs.size(); ++b) {
    const int64_t s0 = buckets.shard_begin(b), sn = buckets.shard_numel(b);
    Shard sh{ctx.zeros({bs[b].numel}, compute, MemCategory::Weights),
             mixed ? ctx.zeros({sn}, DType::F32, MemCategory::MasterWeights) : Tensor(),
             ctx.zeros({sn}, DType::F32, MemCategory::OptimizerState),
             ctx.zeros({sn}, DType::F32, MemCategory::OptimizerState),
             ctx.zeros({sn}, compute, MemCategory::Communication)};
    for (const GradBuckets::Slot& s : bs[b].slots) {
      BRAID_CHECK(!mixed || s.param->value.dtype() == DType::F32,
                  "ZeroAdamW: {} is {}, expected f32 values to convert", s.param->name,
                  s.param->value.str());
      const int64_t lo = std::max(s.offset, s0), hi = std::min(s.offset + s.numel, s0 + sn);
      if (mixed && lo < hi)  // this rank's part of the parameter, kept exact
        sh.master.slice0(lo - s0, hi - s0)
            .copy_from(s.param->value.view({s.numel}).slice0(lo - s.offset, hi - s.offset));
      // Re-bind the parameter into the bucket's flat parameter buffer (its old storage goes).
      Tensor view = sh.values.slice0(s.offset, s.offset + s.numel).view(s.param->value.shape());
      if (mixed)
        cast(ctx, view, s.param->value);
      else
        view.copy_from(s.param->value);
      s.param->value = view;
      if (lo < hi)
        segments_.push_back(
            {s.param, b, lo - s.offset, lo - s0, hi - lo, adamw_decays(*s.param, cfg_)});
    }
    shards_.push_back(std::move(sh));
  }
}

Tensor ZeroAdamW::update_target(const Segment& s) {
  Shard& sh = shards_[s.bucket];
  if (low_precision()) return sh.master.slice0(s.shard_begin, s.shard_begin + s.numel);
  const int64_t at = buckets_.shard_begin(s.bucket) + s.shard_begin;
  return sh.values.slice0(at, at + s.numel);
}

double ZeroAdamW::grad_norm() {
  KernelTimer timer(ctx_.profiler(), KernelGroup::Optimizer);
  double sq = 0.0;
  for (size_t b = 0; b < shards_.size(); ++b) sq += sum_squares(ctx_, buckets_.shard(b));
  return std::sqrt(all_sum_doubles(buckets_.comm(), {sq})[0]);
}

double ZeroAdamW::grad_norm(Communicator* tp, Communicator* pp) {
  const bool split_tp = tp && tp->size() > 1, split_pp = pp && pp->size() > 1;
  if (!split_tp && !split_pp) return grad_norm();
  KernelTimer timer(ctx_.profiler(), KernelGroup::Optimizer);
  double sharded = 0.0, replicated = 0.0;
  for (const Segment& s : segments_) {
    if (s.p->replica) continue;
    const double q =
        sum_squares(ctx_, buckets_.shard(s.bucket).slice0(s.shard_begin, s.shard_begin + s.numel));
    if (s.p->shard.sharded())
      sharded += q / static_cast<double>(s.p->shard.replicas);
    else
      replicated += q;
  }
  const std::vector<double> dp = all_sum_doubles(buckets_.comm(), {sharded, replicated});
  double total = (split_tp ? all_sum_doubles(*tp, {dp[0]})[0] : dp[0]) + dp[1];
  if (split_pp) total = all_sum_doubles(*pp, {total})[0];
  return std::sqrt(total);
}

void ZeroAdamW::clip(double norm, float max_norm) {
  KernelTimer timer(ctx_.profiler(), KernelGroup::Optimizer);
  if (max_norm <= 0.0f || !(norm > max_norm)) return;
  const float scale = static_cast<float>(max_norm / (norm + 1e-6));
  for (size_t b = 0; b < shards_.size(); ++b) {
    Tensor g = buckets_.shard(b);
    scale_inplace(ctx_, g, scale);
  }
}

void ZeroAdamW::step(float lr) {
  {
    KernelTimer timer(ctx_.profiler(), KernelGroup::Optimizer);
    ++t_;
    AdamWStep k = adamw_step_constants(cfg_, t_, lr);
    for (const Segment& s : segments_) {
      k.decay = s.decay ? lr * cfg_.weight_decay : 0.0f;
      Shard& sh = shards_[s.bucket];
      Tensor w = update_target(s);
      Tensor m = sh.m.slice0(s.shard_begin, s.shard_begin + s.numel);
      Tensor v = sh.v.slice0(s.shard_begin, s.shard_begin + s.numel);
      const Tensor g = buckets_.shard(s.bucket).slice0(s.shard_begin, s.shard_begin + s.numel);
      adamw_update(ctx_, w, m, v, g, k);
    }
  }
  // Every rank's new part to every rank: issue all, then wait (the sends may overlap).
  std::vector<Work> works;
  for (size_t b = 0; b < shards_.size(); ++b) {
    Shard& sh = shards_[b];
    const int64_t s0 = buckets_.shard_begin(b);
    if (low_precision())
      cast(ctx_, sh.send, sh.master);  // round once, here; the gather moves 16-bit values
    else
      sh.send.copy_from(sh.values.slice0(s0, s0 + sh.send.numel()));
    works.push_back(buckets_.comm().all_gather(sh.send, sh.values));
  }
  for (Work& w : works) w.wait();
}

void ZeroAdamW::scale_grads(float s) {
  KernelTimer timer(ctx_.profiler(), KernelGroup::Optimizer);
  for (size_t b = 0; b < shards_.size(); ++b) {
    Tensor g = buckets_.shard(b);
    scale_inplace(ctx_, g, s);
  }
}

std::vector<std::pair<std::string, Tensor>> ZeroAdamW::gather_state() {
  std::vector<std::pair<std::string, Tensor>> out;
  const auto& bs = buckets_.buckets();
  for (size_t b = 0; b < shards_.size(); ++b) {
    Tensor m = ctx_.empty({bs[b].numel}, DType::F32, MemCategory::Communication);
    Tensor v = ctx_.empty({bs[b].numel}, DType::F32, MemCategory::Communication);
    Work wm = buckets_.comm().all_gather(shards_[b].m, m);
    Work wv = buckets_.comm().all_gather(shards_[b].v, v);
    wm.wait();
    wv.wait();
    for (const GradBuckets::Slot& s : bs[b].slots) {
      const Shape& shape = s.param->value.shape();
      out.emplace_back(s.param->name + ".exp_avg",
                       m.slice0(s.offset, s.offset + s.numel).view(shape));
      out.emplace_back(s.param->name + ".exp_avg_sq",
                       v.slice0(s.offset, s.offset + s.numel).view(shape));
    }
  }
  return out;
}

std::vector<std::pair<std::string, Tensor>> ZeroAdamW::shard_state(nlohmann::json& records) const {
  std::vector<std::pair<std::string, Tensor>> out;
  records = nlohmann::json::object();
  for (const Segment& s : segments_) {
    const Shard& sh = shards_[s.bucket];
    for (int which = 0; which < 2; ++which) {
      const std::string name = s.p->name + (which == 0 ? ".exp_avg" : ".exp_avg_sq");
      out.emplace_back(name,
                       (which == 0 ? sh.m : sh.v).slice0(s.shard_begin, s.shard_begin + s.numel));
      records[name] = {{"flat_begin", s.param_begin}, {"global_shape", s.p->value.shape()}};
    }
  }
  return out;
}

void ZeroAdamW::load_state(const std::function<Tensor(const std::string&)>& get,
                           int64_t steps_taken) {
  for (const Segment& s : segments_) {
    Shard& sh = shards_[s.bucket];
    for (int which = 0; which < 2; ++which) {
      const Tensor full = get(s.p->name + (which == 0 ? ".exp_avg" : ".exp_avg_sq"));
      BRAID_CHECK(full.numel() == s.p->value.numel() && full.dtype() == DType::F32,
                  "optimizer state of {} is {}", s.p->name, full.str());
      Tensor dst = (which == 0 ? sh.m : sh.v).slice0(s.shard_begin, s.shard_begin + s.numel);
      dst.copy_from(full.view({full.numel()}).slice0(s.param_begin, s.param_begin + s.numel));
    }
  }
  t_ = steps_taken;
}

std::vector<std::pair<std::string, Tensor>> ZeroAdamW::gather_masters() {
  BRAID_CHECK(low_precision(), "ZeroAdamW::gather_masters: f32 parameters are their own masters");
  std::vector<std::pair<std::string, Tensor>> out;
  const auto& bs = buckets_.buckets();
  for (size_t b = 0; b < shards_.size(); ++b) {
    Tensor full = ctx_.empty({bs[b].numel}, DType::F32, MemCategory::Communication);
    buckets_.comm().all_gather(shards_[b].master, full).wait();
    for (const GradBuckets::Slot& s : bs[b].slots)
      if (!s.param->replica)
        out.emplace_back(s.param->name,
                         full.slice0(s.offset, s.offset + s.numel).view(s.param->value.shape()));
  }
  return out;
}

void ZeroAdamW::load_masters(const std::function<Tensor(const std::string&)>& get) {
  BRAID_CHECK(low_precision(), "ZeroAdamW::load_masters: f32 parameters are their own masters");
  for (const Segment& s : segments_) {
    const Tensor full = get(s.p->name);
    shards_[s.bucket]
        .master.slice0(s.shard_begin, s.shard_begin + s.numel)
        .copy_from(full.view({full.numel()}).slice0(s.param_begin, s.param_begin + s.numel));
  }
  for (const GradBuckets::Bucket& b : buckets_.buckets())
    for (const GradBuckets::Slot& s : b.slots) cast(ctx_, s.param->value, get(s.param->name));
}

}  // namespace braid
