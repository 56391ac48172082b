// MixedPrecision: f32 masters, 16-bit weights and the fp16 loss scale around an inner optimizer.
#include "optim/mixed_precision.h"

#include <cmath>
#include <unordered_map>

#include "core/kernels/cpu/convert.h"
#include "core/kernels/gemm.h"

namespace braid {

MixedPrecision::MixedPrecision(ExecContext& ctx, std::vector<Parameter*> params, DType compute,
                               const LossScaleConfig& scaling, const MakeInner& make_inner)
    : ctx_(ctx), params_(std::move(params)) {
  BRAID_CHECK(compute == DType::BF16 || compute == DType::F16,
              "MixedPrecision: compute dtype {} is not bf16 or f16", dtype_name(compute));
  std::vector<Parameter*> own;  // what is still f32: everything unless a ZeroAdamW came first
  int64_t converted = 0;        // trainable parameters a sharded inner optimizer converted
  for (Parameter* p : params_) {
    if (p->trainable && p->value.dtype() == compute)
      ++converted;
    else
      own.push_back(p);
  }
  masters_ = std::make_unique<MasterWeights>(ctx, own, compute);
  inner_ = make_inner(masters_->params());
  BRAID_CHECK(inner_, "MixedPrecision: make_inner built no optimizer");
  // Converted parameters whose masters no optimizer keeps would never be updated: refuse.
  BRAID_CHECK(converted == 0 || inner_->sharded(),
              "MixedPrecision: {} trainable parameters were already {} but the inner optimizer "
              "keeps no masters of them (build the ZeroAdamW first and return it)",
              converted, dtype_name(compute));
  if (compute == DType::F16) scaler_.emplace(scaling);
}

void MixedPrecision::step(float lr) { masters_->step(*inner_, lr); }

std::string MixedPrecision::describe(const ExecContext& ctx) const {
  // The kernels' paths: the CPU's conversions and bf16 GEMM, or on a GPU cuBLASLt's GEMMs in
  // the 16-bit type with f32 accumulation.
  const std::string paths =
      ctx.device().is_cpu()
          ? fmt::format("{}; {}", cpu::convert_isa_description(ctx.cpu_isa()),
                        gemm_bf16_description(ctx))
          : fmt::format("{} GEMMs on cuBLASLt (f32 accumulation)", dtype_name(compute_dtype()));
  std::string s = fmt::format(
      "precision {}: weights and activations {}, fp32 master weights, "
      "gradients and optimizer state; {}",
      dtype_name(compute_dtype()), dtype_name(compute_dtype()), paths);
  if (const std::string in = inner_->describe(ctx); !in.empty()) s += "; " + in;
  if (scaler_) s += fmt::format("; dynamic loss scale from {}", scaler_->scale());
  return s;
}

std::optional<NamedTensors> MixedPrecision::checkpoint_masters(bool writer) {
  // A sharded inner optimizer gathers its masters (collective, so before any early return).
  std::optional<NamedTensors> inner = inner_->checkpoint_masters(writer);
  if (!writer) return NamedTensors{};
  if (!inner) return masters_->named_masters();
  // Model order, as the model's own weights are written: the gathered masters and the
  // parameters converted here.
  std::unordered_map<std::string, Tensor> by_name;
  for (auto& [n, t] : *inner) by_name.emplace(n, t);
  for (auto& [n, t] : masters_->named_masters()) by_name.emplace(n, t);
  NamedTensors out;
  for (Parameter* p : params_)
    if (auto it = by_name.find(p->name); it != by_name.end()) out.emplace_back(p->name, it->second);
  return out;
}

bool MixedPrecision::skip_step(double loss, double* norm, int64_t step,
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
  inner_->scale_grads(1.0f / u.old_scale);
  *norm /= static_cast<double>(u.old_scale);
  return false;
}

nlohmann::json MixedPrecision::loss_scaler_state() const {
  if (!scaler_) return nullptr;
  const LossScaler::State s = scaler_->state();
  return {{"scale", s.scale},
          {"good_steps", s.good_steps},
          {"hysteresis_left", s.hysteresis_left},
          {"skips_in_a_row", s.skips_in_a_row},
          {"skipped_total", s.skipped_total}};
}

void MixedPrecision::restore_loss_scaler(const nlohmann::json& state) {
  if (!scaler_ || !state.is_object()) return;  // a checkpoint from fp32/bf16 keeps the start scale
  LossScaler::State s{state.value("scale", scaler_->scale()), state.value("good_steps", 0),
                      state.value("hysteresis_left", scaler_->state().hysteresis_left),
                      state.value("skips_in_a_row", 0), state.value("skipped_total", int64_t{0})};
  scaler_->restore(s);
}

}  // namespace braid
