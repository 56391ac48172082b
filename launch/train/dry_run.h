// `braid train --dry-run`: the planner's per-rank memory plan next to what one real training
// step measured (the allocator's peaks by category), without writing a run directory.
#pragma once

#include "launch/config/train_config.h"

namespace braid {

void dry_run(const RunConfig& cfg);

}  // namespace braid
