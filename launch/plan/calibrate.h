// --calibrate: measures this machine's GEMM rates, braid's kernel rates and memory bandwidth as a
// device profile.
#pragma once

#include <vector>

#include "launch/plan/plan_types.h"

namespace braid::plan {

struct CalibrateOptions {
  int gemm_size = 1024;            // square GEMM edge (the peak used for MFU)
  double min_seconds = 0.5;        // time spent per peak/bandwidth measurement
  size_t copy_bytes = 256u << 20;  // buffer of the stream-like copy
  // Training-like kernels: a micro-batch of `tokens` tokens, each shape timed for at least
  // kernel_seconds after a warm-up call.
  int tokens = 2048;
  double kernel_seconds = 0.4;
  std::vector<int> gemm_widths = {128, 256, 512, 768};  // n_embd of the linear-layer GEMMs
  std::vector<int> head_dims = {32, 64, 128};           // attention at n_embd 512, T 256
  std::vector<int> lm_head_widths = {128, 256, 512};    // LM head + CE at vocab 4096
};

// Runs the measurements (uses the process's OpenMP threads) and returns a profile whose rates
// are achieved rates, so matmul_efficiency is 1. Communication bandwidth is taken as the
// memcpy bandwidth: ranks on one node exchange through shared memory.
GpuSpec calibrate_machine(const CalibrateOptions& opt);

}  // namespace braid::plan
