// OptimConfig validation.
#include "optim/optim_config.h"

namespace braid {

void OptimConfig::validate() const {
  if (name != "adamw" && name != "adamw8bit")
    config_error("name", "name is '{}'; expected adamw or adamw8bit", name);
  if (!(lr > 0.0f)) config_error("lr", "lr is {}; expected > 0", lr);
  if (!(min_lr >= 0.0f && min_lr <= lr))
    config_error("min_lr", "min_lr is {}; expected 0..lr ({})", min_lr, lr);
  if (warmup_steps < 0)
    config_error("warmup_steps", "warmup_steps is {}; expected >= 0", warmup_steps);
  if (decay != "cosine" && decay != "linear" && decay != "constant")
    config_error("decay", "decay is '{}'; expected cosine, linear or constant", decay);
  if (decay_steps < 0) config_error("decay_steps", "decay_steps is {}; expected >= 0", decay_steps);
  if (!(beta1 >= 0.0f && beta1 < 1.0f))
    config_error("beta1", "beta1 is {}; expected in [0, 1)", beta1);
  if (!(beta2 >= 0.0f && beta2 < 1.0f))
    config_error("beta2", "beta2 is {}; expected in [0, 1)", beta2);
  if (!(eps > 0.0f)) config_error("eps", "eps is {}; expected > 0", eps);
  if (!(weight_decay >= 0.0f))
    config_error("weight_decay", "weight_decay is {}; expected >= 0", weight_decay);
  if (zero != 0 && zero != 1)
    config_error("zero", "zero is {}; expected 0 or 1 (ZeRO-2 and ZeRO-3 are not supported yet)",
                 zero);
  if (!(grad_clip >= 0.0f))
    config_error("grad_clip", "grad_clip is {}; expected >= 0 (0 disables)", grad_clip);
}

}  // namespace braid
