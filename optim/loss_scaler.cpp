// LossScaler: skip on overflow, back off after `hysteresis` overflows, grow after a good run.
#include "optim/loss_scaler.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace braid {

void LossScaleConfig::validate() const {
  if (!(initial > 0.0f) || !std::isfinite(initial))
    config_error("loss_scale_initial", "loss_scale_initial is {}; expected a finite value > 0",
                 initial);
  if (!(growth_factor >= 1.0f))
    config_error("loss_scale_growth_factor", "loss_scale_growth_factor is {}; expected >= 1",
                 growth_factor);
  if (growth_interval < 1)
    config_error("loss_scale_growth_interval", "loss_scale_growth_interval is {}; expected >= 1",
                 growth_interval);
  if (!(backoff > 0.0f && backoff < 1.0f))
    config_error("loss_scale_backoff", "loss_scale_backoff is {}; expected in (0, 1)", backoff);
  if (hysteresis < 1)
    config_error("loss_scale_hysteresis", "loss_scale_hysteresis is {}; expected >= 1", hysteresis);
  if (!(min_scale > 0.0f && min_scale <= initial))
    config_error("loss_scale_min", "loss_scale_min is {}; expected in (0, loss_scale_initial = {}]",
                 min_scale, initial);
  if (max_skipped_steps < 1)
    config_error("max_skipped_steps", "max_skipped_steps is {}; expected >= 1", max_skipped_steps);
}

LossScaler::LossScaler(const LossScaleConfig& cfg)
    : cfg_(cfg), scale_(cfg.initial), hysteresis_left_(cfg.hysteresis) {
  cfg_.validate();
}

LossScaleUpdate LossScaler::update(bool overflow) {
  LossScaleUpdate u;
  u.old_scale = scale_;
  if (overflow) {
    u.skip = true;
    ++skips_in_a_row_;
    ++skipped_total_;
    good_steps_ = 0;
    if (--hysteresis_left_ <= 0) {
      const float next = std::max(scale_ * cfg_.backoff, cfg_.min_scale);
      u.backed_off = next < scale_;
      scale_ = next;
      hysteresis_left_ = cfg_.hysteresis;
    }
    u.new_scale = scale_;
    if (skips_in_a_row_ >= cfg_.max_skipped_steps)
      user_error(
          "fp16 loss scaling skipped {} steps in a row (gradients overflow even at loss scale {}); "
          "the model does not train in fp16 here: use train.precision=bf16 or fp32, lower "
          "optim.lr, or raise train.max_skipped_steps",
          skips_in_a_row_, scale_);
    return u;
  }
  skips_in_a_row_ = 0;
  if (++good_steps_ >= cfg_.growth_interval) {
    good_steps_ = 0;
    hysteresis_left_ = cfg_.hysteresis;
    const float next = scale_ * cfg_.growth_factor;
    if (std::isfinite(next)) {
      u.grew = next > scale_;
      scale_ = next;
    }
  }
  u.new_scale = scale_;
  return u;
}

LossScaler::State LossScaler::state() const {
  return {scale_, good_steps_, hysteresis_left_, skips_in_a_row_, skipped_total_};
}

void LossScaler::restore(const State& s) {
  BRAID_USER_CHECK(s.scale > 0.0f && std::isfinite(s.scale),
                   "checkpoint holds loss scale {}; expected a finite value > 0", s.scale);
  scale_ = s.scale;
  good_steps_ = s.good_steps;
  hysteresis_left_ = s.hysteresis_left;
  skips_in_a_row_ = s.skips_in_a_row;
  skipped_total_ = s.skipped_total;
}

}  // namespace braid
