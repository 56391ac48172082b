// --calibrate: measures this machine's GEMM rates, braid's kernel rates and memory bandwidth as a
// device profile. Its own library (braid_calibrate), which runs kernels and models; the planner
// (launch/plan/, braid_launch) does not link it.
#pragma once

#include "launch/plan/calibrate_options.h"

namespace braid::plan {

// Runs the measurements (uses the process's OpenMP threads) and returns a profile whose rates
// are achieved rates, so matmul_efficiency is 1. Communication bandwidth is taken as the
// memcpy bandwidth: ranks on one node exchange through shared memory.
CalibrationRun calibrate_machine(const CalibrateOptions& opt);

}  // namespace braid::plan
