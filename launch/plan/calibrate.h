// --calibrate: measures this machine's GEMM rates and memory bandwidth as a device profile.
#pragma once

#include "launch/plan/plan_types.h"

namespace braid::plan {

struct CalibrateOptions {
  int gemm_size = 1024;       // square GEMM edge
  double min_seconds = 0.5;   // time spent per measurement
  size_t copy_bytes = 256u << 20;  // buffer of the stream-like copy
};

// Runs the measurements (uses the process's OpenMP threads) and returns a profile whose rates
// are achieved rates, so matmul_efficiency is 1. Communication bandwidth is taken as the
// memcpy bandwidth: ranks on one node exchange through shared memory.
GpuSpec calibrate_machine(const CalibrateOptions& opt);

}  // namespace braid::plan
