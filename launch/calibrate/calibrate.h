// --calibrate: measures this machine's GEMM rates, braid's kernel rates and memory bandwidth as a
// device profile. It runs kernels and models, so it lives outside the planner's pure formulas
// (launch/plan/ may not include launch/calibrate/: tests/unit/test_layering.cpp); main() hands it
// to the plan command.
#pragma once

#include "launch/plan/calibrate_options.h"

namespace braid::plan {

// Runs the measurements on opt.device and returns a profile whose rates are achieved rates, so
// matmul_efficiency is 1. On the CPU (the process's OpenMP threads) communication bandwidth is
// taken as the memcpy bandwidth: ranks on one node exchange through shared memory. On a GPU
// (cuda[:N]) the same probes run on a CUDA context, each timed call followed by a stream
// synchronisation, and gpu_profile_from_measurements assembles the profile; a UserError says
// why when no GPU can be used (nothing is measured or written).
CalibrationRun calibrate_machine(const CalibrateOptions& opt);

}  // namespace braid::plan
