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
  const bool mixed = low_precision(), eight_bit = cfg_.name == "adamw8bit";
  const auto& bs = buckets_.buckets();
  for (size_t b = 0; b < bs.size(); ++b) {
    const int64_t s0 = buckets_.shard_begin(b), sn = buckets_.shard_numel(b);
    auto moment = [&](int64_t n) {
      return ctx.zeros({n}, DType::F32, MemCategory::OptimizerState);
    };
    Shard sh{mixed ? ctx.zeros({sn}, DType::F32, MemCategory::MasterWeights) : Tensor(),
             eight_bit ? Tensor() : moment(sn), eight_bit ? Tensor() : moment(sn)};
    for (const GradBuckets::Slot& s : bs[b].slots) {
      BRAID_CHECK(!mixed || s.param->value.dtype() == DType::F32,
                  "ZeroAdamW: {} is {}, expected f32 values to convert", s.param->name,
                  s.param->value.str());
      const int64_t lo = std::max(s.offset, s0), hi = std::min(s.offset + s.numel, s0 + sn);
      if (lo >= hi) continue;
      if (mixed)  // this rank's part of the parameter, kept exact
        sh.master.slice0(lo - s0, hi - s0)
            .copy_from(s.param->value.view({s.numel}).slice0(lo - s.offset, hi - s.offset));
      Segment seg;
      seg.p = s.param;
      seg.bucket = b;
      seg.param_begin = lo - s.offset;
      seg.shard_begin = lo - s0;
      seg.numel = hi - lo;
      seg.decay = adamw_decays(*s.param, cfg_);
      if (!eight_bit) {
        seg.m = sh.m.slice0(seg.shard_begin, seg.shard_begin + seg.numel);
        seg.v = sh.v.slice0(seg.shard_begin, seg.shard_begin + seg.numel);
      } else if (s.numel < kAdam8bitMinNumel) {
        seg.m = moment(seg.numel);
        seg.v = moment(seg.numel);
      } else {
        // Whole blocks only: what the buckets' alignment guarantees.
        BRAID_CHECK(seg.param_begin % kAdam8bitBlock == 0 &&
                        (hi == s.offset + s.numel || seg.numel % kAdam8bitBlock == 0),
                    "ZeroAdamW: {}'s shard [{}, {}) splits a block of {}; adamw8bit needs "
                    "buckets aligned to it (GradBucketOptions::align)",
                    s.param->name, seg.param_begin, seg.param_begin + seg.numel, kAdam8bitBlock);
        auto codes = [&] { return ctx.zeros({seg.numel}, DType::U8, MemCategory::OptimizerState); };
        seg.m_codes = codes();
        seg.v_codes = codes();
        seg.m_absmax = moment(adamw8bit_blocks(seg.numel));
        seg.v_absmax = moment(adamw8bit_blocks(seg.numel));
      }
      segments_.push_back(std::move(seg));
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
  std::vector<Tensor> shards;
  for (size_t b = 0; b < shards_.size(); ++b) shards.push_back(buckets_.shard(b));
  double sq = 0.0;  // in bucket order, as before: one wait on a GPU instead of one per bucket
  for (const double x : sum_squares_each(ctx_, shards)) sq += x;
  return std::sqrt(all_sum_doubles(buckets_.comm(), {sq})[0]);
}

double ZeroAdamW::grad_norm() {
  Communicator *tp = groups_.tp, *pp = groups_.pp;
  const bool split_tp = tp && tp->size() > 1, split_pp = pp && pp->size() > 1;
  if (!split_tp && !split_pp) return dp_grad_norm();
  KernelTimer timer(ctx_.profiler(), KernelGroup::Optimizer);
  std::vector<Tensor> parts;
  std::vector<const Segment*> counted;
  for (const Segment& s : segments_) {
    if (s.p->replica) continue;
    parts.push_back(buckets_.shard(s.bucket).slice0(s.shard_begin, s.shard_begin + s.numel));
    counted.push_back(&s);
  }
  const std::vector<double> sums = sum_squares_each(ctx_, parts);  // one wait on a GPU
  double sharded = 0.0, replicated = 0.0;
  for (size_t i = 0; i < counted.size(); ++i) {
    const Segment& s = *counted[i];
    const double q = sums[i];
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

void ZeroAdamW::clip(double norm, float max_norm) { grad_scale_ *= clip_factor(norm, max_norm); }

void ZeroAdamW::step(float lr) {
  {
    KernelTimer timer(ctx_.profiler(), KernelGroup::Optimizer);
    ++t_;
    AdamWStep k = adamw_step_constants(cfg_, t_, lr);
    k.grad_scale = grad_scale_;  // the clip, inside the update
    grad_scale_ = 1.0f;
    for (Segment& s : segments_) {
      k.decay = s.decay ? lr * cfg_.weight_decay : 0.0f;
      Tensor w = update_target(s);
      const Tensor g = buckets_.shard(s.bucket).slice0(s.shard_begin, s.shard_begin + s.numel);
      // bf16/f16: the new masters rounded once, into this rank's part of the weights (by the
      // update itself where it can); the gather below then moves compute-dtype values.
      Tensor low = low_precision()
                       ? dp_.param_shard(s.bucket).slice0(s.shard_begin, s.shard_begin + s.numel)
                       : Tensor();
      if (s.eight_bit()) {
        adamw8bit_update(ctx_, w, s.m_codes, s.m_absmax, s.v_codes, s.v_absmax, g, k);
        if (low.defined()) cast(ctx_, low, w);
      } else {
        adamw_update(ctx_, w, s.m, s.v, g, k, low.defined() ? &low : nullptr);
      }
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
  return gather_masters(writer);  // collective: every rank, writer or not
}

NamedTensors ZeroAdamW::state_tensors(nlohmann::json* pieces) const {
  BRAID_CHECK(pieces, "ZeroAdamW::state_tensors: the pieces' records need somewhere to go");
  return shard_state(*pieces);
}

std::string ZeroAdamW::describe(const ExecContext& /*ctx*/) const {
  const char* moments = cfg_.name == "adamw8bit" ? "8-bit moments" : "moments";
  if (!low_precision())
    return cfg_.name == "adamw8bit"
               ? fmt::format("ZeRO-1: {} sharded over {} DP ranks in whole blocks of {}", moments,
                             dp_.size(), kAdam8bitBlock)
               : "";
  return fmt::format("ZeRO-1: f32 masters and {} sharded over {} DP ranks, {} weights all-gathered",
                     moments, dp_.size(), dtype_name(compute_));
}

void ZeroAdamW::scale_grads(float s) {
  KernelTimer timer(ctx_.profiler(), KernelGroup::Optimizer);
  for (size_t b = 0; b < shards_.size(); ++b) {
    Tensor g = buckets_.shard(b);
    scale_inplace(ctx_, g, s);
  }
}

std::vector<std::pair<std::string, Tensor>> ZeroAdamW::gather_state() {
  BRAID_CHECK(cfg_.name == "adamw", "ZeroAdamW::gather_state: {} moments are saved as pieces",
              cfg_.name);
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
  auto piece = [&](const std::string& name, const Tensor& t, int64_t begin, const Shape& shape) {
    out.emplace_back(name, t);
    records[name] = {{"flat_begin", begin}, {"global_shape", shape}};
  };
  for (const Segment& s : segments_) {
    const std::string& p = s.p->name;
    const Shape& shape = s.p->value.shape();
    if (s.eight_bit()) {
      const Shape blocks{adamw8bit_blocks(s.p->value.numel())};
      const int64_t block0 = s.param_begin / kAdam8bitBlock;
      piece(p + ".exp_avg_codes", s.m_codes, s.param_begin, shape);
      piece(p + ".exp_avg_absmax", s.m_absmax, block0, blocks);
      piece(p + ".exp_avg_sq_codes", s.v_codes, s.param_begin, shape);
      piece(p + ".exp_avg_sq_absmax", s.v_absmax, block0, blocks);
      continue;
    }
    piece(p + ".exp_avg", s.m, s.param_begin, shape);
    piece(p + ".exp_avg_sq", s.v, s.param_begin, shape);
  }
  return out;
}

void ZeroAdamW::load_state(const std::function<Tensor(const std::string&)>& get,
                           int64_t steps_taken) {
  // dst = elements [begin, begin + dst.numel()) of the flattened whole tensor `name`.
  auto take = [&](const std::string& name, Tensor& dst, int64_t begin, int64_t whole_numel,
                  DType dtype) {
    const Tensor full = get(name);
    BRAID_USER_CHECK(full.numel() == whole_numel && full.dtype() == dtype,
                     "optimizer state {} is {}; expected {} {} elements (a checkpoint of "
                     "another optimizer or layout)",
                     name, full.str(), whole_numel, dtype_name(dtype));
    dst.copy_from(full.view({full.numel()}).slice0(begin, begin + dst.numel()));
  };
  for (Segment& s : segments_) {
    const std::string& p = s.p->name;
    const int64_t n = s.p->value.numel();
    if (s.eight_bit()) {
      const int64_t blocks = adamw8bit_blocks(n), block0 = s.param_begin / kAdam8bitBlock;
      take(p + ".exp_avg_codes", s.m_codes, s.param_begin, n, DType::U8);
      take(p + ".exp_avg_absmax", s.m_absmax, block0, blocks, DType::F32);
      take(p + ".exp_avg_sq_codes", s.v_codes, s.param_begin, n, DType::U8);
      take(p + ".exp_avg_sq_absmax", s.v_absmax, block0, blocks, DType::F32);
      continue;
    }
    take(p + ".exp_avg", s.m, s.param_begin, n, DType::F32);
    take(p + ".exp_avg_sq", s.v, s.param_begin, n, DType::F32);
  }
  t_ = steps_taken;
}

std::vector<std::pair<std::string, Tensor>> ZeroAdamW::gather_masters(bool keep) {
  BRAID_CHECK(low_precision(), "ZeroAdamW::gather_masters: f32 parameters are their own masters");
  std::vector<std::pair<std::string, Tensor>> out;
  const auto& bs = buckets_.buckets();
  for (size_t b = 0; b < shards_.size(); ++b) {
    Tensor full = ctx_.empty({bs[b].numel}, DType::F32, MemCategory::Communication);
    buckets_.comm().all_gather(shards_[b].master, full).wait();
    if (!keep) continue;
    // Each bucket's whole masters go to host memory before the next is gathered: on a GPU all
    // of them at once (4 bytes a parameter beside the training state) would not fit.
    full = full.to_host();
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
    for (const GradBuckets::Slot& s : b.slots)  // on a GPU the kernel needs its input there
      cast(ctx_, s.param->value, ctx_.to_device(get(s.param->name), MemCategory::Other));
}

}  // namespace braid
