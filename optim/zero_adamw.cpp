// ZeroAdamW: sharded moments, shard updates and the parameter all-gather.
#include "optim/zero_adamw.h"

#include <algorithm>
#include <cmath>

#include "core/kernels/elementwise.h"
#include "core/kernels/optimizer.h"
#include "core/profile.h"
#include "optim/adamw.h"
#include "parallel/scalar_reduce.h"

namespace braid {

ZeroAdamW::ZeroAdamW(ExecContext& ctx, DataParallel& dp, const OptimConfig& cfg, DType compute,
                     const ModelGroups& groups)
    : ctx_(ctx), dp_(dp), buckets_(dp.buckets()), cfg_(cfg), compute_(compute), groups_(groups) {
  cfg_.validate();
  BRAID_CHECK(dp.sharded(), "ZeroAdamW needs a sharded DataParallel (ZeRO-1 on two or more ranks)");
  BRAID_CHECK(compute == DType::F32 || compute == DType::BF16 || compute == DType::F16,
              "ZeroAdamW: compute dtype {} is not f32, bf16 or f16", dtype_name(compute));
  const bool mixed = low_precision();
  const auto& bs = buckets_.buckets();
  for (size_t b = 0; b < bs.size(); ++b) {
    const int64_t s0 = buckets_.shard_begin(b), sn = buckets_.shard_numel(b);
    Shard sh{mixed ? ctx.zeros({sn}, DType::F32, MemCategory::MasterWeights) : Tensor(),
             ctx.zeros({sn}, DType::F32, MemCategory::OptimizerState),
             ctx.zeros({sn}, DType::F32, MemCategory::OptimizerState)};
    for (const GradBuckets::Slot& s : bs[b].slots) {
      BRAID_CHECK(!mixed || s.param->value.dtype() == DType::F32,
                  "ZeroAdamW: {} is {}, expected f32 values to convert", s.param->name,
                  s.param->value.str());
      const int64_t lo = std::max(s.offset, s0), hi = std::min(s.offset + s.numel, s0 + sn);
      if (mixed && lo < hi)  // this rank's part of the parameter, kept exact
        sh.master.slice0(lo - s0, hi - s0)
            .copy_from(s.param->value.view({s.numel}).slice0(lo - s.offset, hi - s.offset));
      if (lo < hi)
        segments_.push_back(
            {s.param, b, lo - s.offset, lo - s0, hi - lo, adamw_decays(*s.param, cfg_)});
    }
    shards_.push_back(std::move(sh));
  }
  // The parameters move into the buckets' flat buffers, in the compute dtype (their f32
  // values go, the masters above kept this rank's part).
  dp.bind_parameters(ctx, compute);
}

Tensor ZeroAdamW::update_target(const Segment& s) {
  if (low_precision())
    return shards_[s.bucket].master.slice0(s.shard_begin, s.shard_begin + s.numel);
  return dp_.param_shard(s.bucket).slice0(s.shard_begin, s.shard_begin + s.numel);
}

double ZeroAdamW::dp_grad_norm() {
  KernelTimer timer(ctx_.profiler(), KernelGroup::Optimizer);
  double sq = 0.0;
  for (size_t b = 0; b < shards_.size(); ++b) sq += sum_squares(ctx_, buckets_.shard(b));
  return std::sqrt(all_sum_doubles(buckets_.comm(), {sq})[0]);
}

double ZeroAdamW::grad_norm() {
  Communicator *tp = groups_.tp, *pp = groups_.pp;
  const bool split_tp = tp && tp->size() > 1, split_pp = pp && pp->size() > 1;
  if (!split_tp && !split_pp) return dp_grad_norm();
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
  // bf16/f16: round the new masters once, here, into this rank's shard of the weights; then
  // every rank's new part to every rank (the gather moves compute-dtype values).
  if (low_precision()) {
    for (size_t b = 0; b < shards_.size(); ++b) {
      Tensor w = dp_.param_shard(b);
      cast(ctx_, w, shards_[b].master);
    }
  }
  dp_.gather_parameters();
}

std::vector<Tensor> ZeroAdamW::grads() const {
  std::vector<Tensor> out;
  for (size_t b = 0; b < shards_.size(); ++b) out.push_back(buckets_.shard(b));
  return out;
}

std::optional<NamedTensors> ZeroAdamW::checkpoint_masters(bool writer) {
  if (!low_precision()) return std::nullopt;
  NamedTensors all = gather_masters();  // collective: every rank, writer or not
  if (!writer) all.clear();
  return all;
}

NamedTensors ZeroAdamW::state_tensors(nlohmann::json* pieces) const {
  BRAID_CHECK(pieces, "ZeroAdamW::state_tensors: the pieces' records need somewhere to go");
  return shard_state(*pieces);
}

std::string ZeroAdamW::describe(const ExecContext& /*ctx*/) const {
  if (!low_precision()) return "";
  return fmt::format(
      "ZeRO-1: f32 masters and moments sharded over {} DP ranks, {} weights all-gathered",
      dp_.size(), dtype_name(compute_));
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
