// The MFU denominator: train.peak_tflops, or this machine's f32 GEMM peak measured once and
// cached, so two runs of one config on one machine report comparable MFU.
#pragma once

#include <string>

#include "core/context.h"
#include "core/precision.h"
#include "launch/report/run_record.h"

namespace braid {

struct PeakChoice {
  double flops_per_s = 0;
  std::string source;  // for the log: "train.peak_tflops", "measured now, cached in ...", ...
};

// The cache is <$XDG_CACHE_HOME or $HOME/.cache>/braid/peak.json, one entry per
// (CPU model, threads, GEMM backend, ONEDNN_MAX_CPU_ISA). A missing entry is measured
// (measure_gemm_peak_f32 for probe_seconds) and stored; a cache that cannot be written only
// costs the next run a new measurement.
// On a GPU: the published dense peak of the GPU (by its name in the planner's GPU table) for
// `precision`.
PeakChoice choose_mfu_peak(ExecContext& ctx, double peak_tflops, const MachineInfo& m,
                           double probe_seconds, Precision precision = Precision::FP32);

// The cache key of a machine, e.g. "AMD EPYC 7B13 | 2 threads | onednn".
std::string peak_cache_key(const MachineInfo& m);

}  // namespace braid
