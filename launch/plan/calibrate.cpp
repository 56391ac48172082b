// Machine measurements for the device profile (the planner's only kernel calls).
#include "launch/plan/calibrate.h"

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "core/kernels/gemm.h"

namespace braid::plan {

namespace {

using Clock = std::chrono::steady_clock;

// Repeats fn until min_s has passed (after one warm-up call); returns seconds per call.
template <class Fn>
double time_per_call(Fn&& fn, double min_s) {
  fn();
  int reps = 0;
  const auto t0 = Clock::now();
  double elapsed = 0;
  do {
    fn();
    ++reps;
    elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  } while (elapsed < min_s);
  return elapsed / reps;
}

}  // namespace

GpuSpec calibrate_machine(const CalibrateOptions& opt) {
  const int64_t n = opt.gemm_size;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n, 0.0f);  // (n, n) each
  const double flops = 2.0 * n * n * n;
  const double f32_s = time_per_call(
      [&] { gemm_f32(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n); },
      opt.min_seconds);
  std::vector<bf16> ab(n * n, float_to_bf16(0.5f)), bb(n * n, float_to_bf16(0.25f));
  const double bf16_s = time_per_call(
      [&] { gemm_bf16(false, false, n, n, n, 1.0f, ab.data(), n, bb.data(), n, 0.0f, c.data(), n); },
      opt.min_seconds);

  // Stream-like copy: counts bytes read plus bytes written.
  std::vector<char> src(opt.copy_bytes, 1), dst(opt.copy_bytes, 0);
  const double copy_s = time_per_call(
      [&] { std::memcpy(dst.data(), src.data(), src.size()); }, opt.min_seconds);
  const double bw_gbs = 2.0 * static_cast<double>(opt.copy_bytes) / copy_s / 1e9;

  GpuSpec g;
  g.name = "cpu-calibrated";
  g.description = "this machine, measured by braid plan --calibrate (" + gemm_backend_name() + ")";
  const double pages = static_cast<double>(sysconf(_SC_PHYS_PAGES));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  g.memory_gib = pages * page / (1024.0 * 1024.0 * 1024.0);
  g.tflops_fp32 = flops / f32_s / 1e12;
  g.tflops_bf16 = flops / bf16_s / 1e12;
  g.tflops_fp16 = 0;
  g.mem_bw_gbs = bw_gbs;
  g.intra_bw_gbs = bw_gbs / 2;  // one copy moves data in one direction
  g.inter_bw_gbs = bw_gbs / 2;
  g.matmul_efficiency = 1.0;
  g.overhead_gib = 0.25;
  g.gpus_per_node = 1;
  g.source = "measured: gemm " + std::to_string(n) + "^3, memcpy " +
             std::to_string(opt.copy_bytes >> 20) + " MiB";
  return g;
}

}  // namespace braid::plan
