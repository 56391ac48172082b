// Dynamic loss scaling for fp16 training: scale the loss so small gradients survive fp16,
// skip steps whose gradients overflow, back off, and grow the scale again after a run of good
// steps.
#pragma once

#include <cstdint>

#include "core/config_fields.h"

namespace braid {

// The scaler's settings; launch/ maps them from the train section (train.loss_scale_*).
struct LossScaleConfig {
  float initial = 65536.0f;
  float growth_factor = 2.0f;
  int growth_interval = 1000;
  float backoff = 0.5f;
  int hysteresis = 2;
  float min_scale = 1.0f;
  int max_skipped_steps = 20;

  template <class V>
  void visit(V& v) {
    v("loss_scale_initial", initial, "fp16 only: the loss scale at the start of training.");
    v("loss_scale_growth_factor", growth_factor,
      "fp16 only: the scale is multiplied by this after loss_scale_growth_interval steps in a row "
      "without overflow.");
    v("loss_scale_growth_interval", growth_interval,
      "fp16 only: overflow-free steps in a row before the scale grows.");
    v("loss_scale_backoff", backoff,
      "fp16 only: the scale is multiplied by this when it backs off after an overflow.");
    v("loss_scale_hysteresis", hysteresis,
      "fp16 only: overflowing steps (since the last growth) before the scale backs off; every "
      "overflowing step is skipped regardless.");
    v("loss_scale_min", min_scale, "fp16 only: the scale never backs off below this.");
    v("max_skipped_steps", max_skipped_steps,
      "fp16 only: this many skipped (overflowing) steps in a row stop the run with an error.");
  }
  void validate() const;
};

// What update() decided for one step.
struct LossScaleUpdate {
  bool skip = false;        // the step overflowed: do not apply it
  bool backed_off = false;  // the scale was reduced
  bool grew = false;        // the scale was raised
  float old_scale = 0.0f;
  float new_scale = 0.0f;
};

class LossScaler {
 public:
  explicit LossScaler(const LossScaleConfig& cfg);
  float scale() const { return scale_; }
  // After a step's backward: `overflow` = the gradients (or loss) hold inf/NaN. Throws
  // braid::UserError after max_skipped_steps skips in a row.
  LossScaleUpdate update(bool overflow);
  int skipped_in_a_row() const { return skips_in_a_row_; }
  int64_t skipped_total() const { return skipped_total_; }

  // Checkpoint state (scale, good-step count, hysteresis left, skip counts).
  struct State {
    float scale;
    int good_steps, hysteresis_left, skips_in_a_row;
    int64_t skipped_total;
  };
  State state() const;
  void restore(const State& s);

 private:
  LossScaleConfig cfg_;
  float scale_;
  int good_steps_ = 0;
  int hysteresis_left_;
  int skips_in_a_row_ = 0;
  int64_t skipped_total_ = 0;
};

}  // namespace braid
