// The MFU denominator: train.peak_tflops, or this machine's f32 GEMM peak measured once and
// cached, so two runs of one config on one machine report comparable MFU.
#pragma once

#include <string>

#include "core/context.h"
#include "core/precision.h"
#include "launch/report/run_record.h"

namespace braid {

// How long the start-up peak probe runs: the best 1024^3 GEMM rate seen in that time is the
// MFU denominator when train.peak_tflops is 0. On a shared or virtual machine whose speed
// drifts over seconds (docs/benchmarks.md, bench_drift), 0.5 s often saw only a slow spell and
// read MFU high (93 % in one quickstart run); 2 s of best-of is steadier. Over hours
// a host's speed can move further: see remeasure_cached_peak.
inline constexpr double kPeakProbeSeconds = 2.0;

struct PeakChoice {
  double flops_per_s = 0;
  std::string source;       // for the log: "train.peak_tflops", "measured now, cached in ...", ...
  std::string cache_key{};  // the peak.json entry it was read from; empty when not from it
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

// For a run that computed faster than the cached peak it divided by (MFU above 100 %: `observed`
// model FLOP/s per rank over `cached`): the entry was measured while the machine was slower
// (a shared host, a power state). Measures the peak again and caches the larger of the cached
// and the new rate for the next runs. Returns the line for the log.
std::string remeasure_cached_peak(ExecContext& ctx, const std::string& key, double cached,
                                  double observed, double probe_seconds);

}  // namespace braid
