// --calibrate: measures this machine's GEMM rates, braid's kernel rates and memory bandwidth as a
// device profile. It runs kernels and models, so it lives outside the planner's pure formulas
// (launch/plan/ may not include launch/calibrate/: tests/unit/test_layering.cpp); main() hands it
// to the plan command.
#pragma once

#include "launch/plan/calibrate_options.h"

namespace braid::plan {

// Runs the measurements (uses the process's OpenMP threads) and returns a profile whose rates
// are achieved rates, so matmul_efficiency is 1. Communication bandwidth is taken as the
// memcpy bandwidth: ranks on one node exchange through shared memory.
CalibrationRun calibrate_machine(const CalibrateOptions& opt);

}  // namespace braid::plan
