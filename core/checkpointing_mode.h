// Checkpointing: which activations a training step rebuilds in the backward instead of keeping
// (train.checkpointing). The pass that applies it is core/models/checkpointing.h; the planner
// models it (launch/plan/).
#pragma once

#include <array>

#include "core/config_fields.h"

namespace braid {

// None: every activation is kept. Full: a wrapped block keeps only its input and runs its
// forward again in the backward. Selective: cheap, memory-heavy outputs inside each block are
// rebuilt in the backward (braid: the norms' and the activation function's outputs, no GEMM;
// the planner models Megatron-LM's selective recomputation of the attention core).
enum class Checkpointing { None, Full, Selective };

constexpr std::array<EnumName<Checkpointing>, 3> config_enum_names(Checkpointing) {
  return {{{Checkpointing::None, "none"},
           {Checkpointing::Full, "full"},
           {Checkpointing::Selective, "selective"}}};
}

}  // namespace braid
