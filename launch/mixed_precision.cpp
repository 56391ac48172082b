// MixedPrecision: the trainer's one place for train.precision.
#include "launch/mixed_precision.h"

#include <cmath>
#include <cstdlib>
#include <unordered_map>

#include "core/kernels/cpu/convert.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/gemm.h"
#include "launch/checkpoint.h"
#include "launch/model_io.h"

namespace braid {

MixedPrecision::MixedPrecision(ExecContext& ctx, std::vector<Parameter*> params,
                               const TrainConfig& cfg)
    : ctx_(ctx), params_(std::move(params)) {
  const DType dt = precision_dtype(cfg.precision);
  if (dt == DType::F32) return;
  // Test hook (tests/e2e/precision.sh): poison the gradients of this 1-based step once.
  if (const char* s = std::getenv("BRAID_TEST_OVERFLOW_AT_STEP")) inject_step_ = std::atoll(s);
  if (const char* s = std::getenv("BRAID_TEST_OVERFLOW_RANK")) inject_rank_ = std::atoi(s);
  std::vector<Parameter*> own;  // what is still f32: everything unless a ZeroAdamW came first
  for (Parameter* p : params_) {
    if (p->trainable && p->value.dtype() == dt)
      ++left_to_zero_;
    else
      own.push_back(p);
  }
  masters_ = std::make_unique<MasterWeights>(ctx, own, dt);
  if (dt == DType::F16) scaler_.emplace(cfg.loss_scale);
}

std::string MixedPrecision::describe(const GemmPlan& plan) const {
  if (!masters_) return "";
  std::string s = fmt::format(
      "precision {}: weights and activations {}, fp32 master weights, "
      "gradients and optimizer state; {}; {}",
      dtype_name(masters_->compute_dtype()), dtype_name(masters_->compute_dtype()),
      cpu::convert_isa_description(), gemm_bf16_description(plan));
  if (zero_)
    s += fmt::format(
        "; ZeRO-1: f32 masters and moments sharded over {} DP ranks, {} weights "
        "all-gathered",
        zero_->buckets().comm().size(), dtype_name(masters_->compute_dtype()));
  if (scaler_) s += fmt::format("; dynamic loss scale from {}", scaler_->scale());
  return s;
}

void MixedPrecision::use_zero(ZeroAdamW& zero) {
  const DType dt = masters_ ? masters_->compute_dtype() : DType::F32;
  BRAID_CHECK(zero.compute_dtype() == dt,
              "MixedPrecision::use_zero: ZeroAdamW computes in {}, "
              "the run in {}",
              dtype_name(zero.compute_dtype()), dtype_name(dt));
  if (!masters_) return;
  int64_t owned = 0;
  for (const GradBuckets::Bucket& b : zero.buckets().buckets()) owned += std::ssize(b.slots);
  BRAID_CHECK(owned == left_to_zero_,
              "MixedPrecision::use_zero: ZeroAdamW holds {} "
              "parameters, but {} trainable ones were already converted",
              owned, left_to_zero_);
  zero_ = &zero;
}

std::vector<Parameter*> MixedPrecision::optimizer_params() {
  // Converted parameters without a ZeroAdamW would never be updated: refuse.
  BRAID_CHECK(left_to_zero_ == 0 || zero_,
              "MixedPrecision: {} trainable parameters were "
              "converted elsewhere and use_zero() was not called",
              left_to_zero_);
  return masters_ ? masters_->params() : params_;
}

std::vector<std::pair<std::string, Tensor>> MixedPrecision::checkpoint_weights() const {
  BRAID_CHECK(!zero_,
              "MixedPrecision: with ZeRO-1 the masters are sharded; a checkpoint "
              "needs gather_checkpoint_weights() on every rank");
  return masters_ ? masters_->named_masters() : named_weights(params_);
}

std::vector<std::pair<std::string, Tensor>> MixedPrecision::gather_checkpoint_weights(bool lead) {
  if (!zero_) return lead ? checkpoint_weights() : std::vector<std::pair<std::string, Tensor>>{};
  std::vector<std::pair<std::string, Tensor>> sharded = zero_->gather_masters();  // collective
  if (!lead) return {};
  // Model order, as named_weights writes it: the gathered masters and the frozen parameters.
  std::unordered_map<std::string, Tensor> by_name;
  for (auto& [n, t] : sharded) by_name.emplace(n, t);
  for (auto& [n, t] : masters_->named_masters()) by_name.emplace(n, t);
  std::vector<std::pair<std::string, Tensor>> out;
  for (Parameter* p : params_)
    if (auto it = by_name.find(p->name); it != by_name.end()) out.emplace_back(p->name, it->second);
  return out;
}

bool MixedPrecision::check_overflow(double loss, double* norm, int64_t step,
                                    const std::function<void(const std::string&)>& say) {
  if (!scaler_) return false;
  const bool overflow = !std::isfinite(loss) || !std::isfinite(*norm);
  const LossScaleUpdate u = scaler_->update(overflow);  // throws after too many skips
  if (u.skip) {
    say(fmt::format(
        "step {}: fp16 overflow (loss {}, gradient norm {}): step skipped, loss scale "
        "{} -> {}{} ({} skipped in a row)",
        step, loss, *norm, u.old_scale, u.new_scale,
        u.backed_off ? " (backed off)" : " (kept: hysteresis)", scaler_->skipped_in_a_row()));
    return true;
  }
  if (u.grew)
    say(fmt::format("step {}: fp16 loss scale grew {} -> {}", step, u.old_scale, u.new_scale));
  // Gradients carry the scale of the step's loss (u.old_scale): take it out before clipping.
  const float inv = 1.0f / u.old_scale;
  if (zero_) {
    zero_->scale_grads(inv);  // the reduced gradients live in the shards
  } else {
    for (Parameter* p : params_)
      if (p->trainable) scale_inplace(ctx_, p->grad(), inv);
  }
  *norm /= static_cast<double>(u.old_scale);
  return false;
}

void MixedPrecision::inject_test_overflow(int64_t step) {
  if (step != inject_step_) return;
  if (zero_) {
    if (zero_->buckets().comm().rank() != inject_rank_) return;
    Tensor g = zero_->buckets().shard(0);
    return g.fill_(INFINITY);
  }
  for (Parameter* p : params_)
    if (p->trainable) return p->grad().fill_(INFINITY);  // one inf gradient is an overflow
}

void MixedPrecision::step(AdamW& opt, float lr) {
  if (masters_) return masters_->step(opt, lr);
  opt.step(lr);
}

nlohmann::json MixedPrecision::state_json() const {
  if (!scaler_) return nullptr;
  const LossScaler::State s = scaler_->state();
  return {{"scale", s.scale},
          {"good_steps", s.good_steps},
          {"hysteresis_left", s.hysteresis_left},
          {"skips_in_a_row", s.skips_in_a_row},
          {"skipped_total", s.skipped_total}};
}

void MixedPrecision::restore(const nlohmann::json& state) {
  if (!scaler_ || !state.is_object()) return;  // a checkpoint from fp32/bf16 keeps the start scale
  LossScaler::State s{state.value("scale", scaler_->scale()), state.value("good_steps", 0),
                      state.value("hysteresis_left", scaler_->state().hysteresis_left),
                      state.value("skips_in_a_row", 0), state.value("skipped_total", int64_t{0})};
  scaler_->restore(s);
}

}  // namespace braid
