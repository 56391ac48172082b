// Building a rank's ExecContext from the process environment: the one place that reads
// BRAID_GEMM (core/ takes the plan as a value).
#pragma once

#include <cstdint>
#include <memory>

#include "core/context.h"

namespace braid {

// The GEMM plan: oneDNN by default; BRAID_GEMM=onednn|openblas|reference forces a backend
// (benchmarks, tests). Throws UserError naming the variable for anything else.
GemmPlan gemm_plan_from_env();

// A CPU context with the environment's GEMM plan and a fresh caching allocator.
std::unique_ptr<ExecContext> make_cpu_context(uint64_t seed = 0);

}  // namespace braid
