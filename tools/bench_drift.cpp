// Benchmark: how much this machine's speed drifts over time. Runs gemm_f32 512^3 back to back
// for a while and prints the rate averaged over fixed windows, then the spread of those
// averages. On a shared or virtual machine this is the noise floor of any timing comparison,
// and the reason `braid plan --calibrate` times its probes in interleaved rounds.
// Usage: bench_drift [seconds=90] [window_seconds=5]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "launch/train/exec_setup.h"
#include "core/kernels/gemm.h"
#include "core/memory.h"

int main(int argc, char** argv) {
  const double total = argc > 1 ? std::atof(argv[1]) : 90.0;
  const double window = argc > 2 ? std::atof(argv[2]) : 5.0;
  if (!(total > 0 && window > 0 && window <= total)) {
    std::fprintf(stderr, "usage: bench_drift [seconds > 0] [window_seconds in (0, seconds]]\n");
    return 2;
  }
  const int64_t n = 512;
  braid::AlignedVector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n, 0.0f);
  const double flops = 2.0 * n * n * n;
  using Clock = std::chrono::steady_clock;
  auto secs = [](Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  const std::unique_ptr<braid::ExecContext> ctx = braid::make_cpu_context();
  braid::gemm_f32(*ctx, false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);  // warm-up
  std::printf("# gemm_f32 %lld^3, %s, %d OpenMP threads; GFLOP/s per %.0f s window\n",
              static_cast<long long>(n), braid::gemm_backend_name(ctx->gemm()).c_str(), omp_get_max_threads(), window);
  std::printf("| window end s | GFLOP/s |\n|---:|---:|\n");
  std::vector<double> rates;
  const auto start = Clock::now();
  while (secs(start) < total) {
    const auto w0 = Clock::now();
    int64_t calls = 0;
    while (secs(w0) < window) {
      braid::gemm_f32(*ctx, false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
      ++calls;
    }
    rates.push_back(flops * static_cast<double>(calls) / secs(w0) / 1e9);
    std::printf("| %.0f | %.1f |\n", secs(start), rates.back());
    std::fflush(stdout);
  }
  double sum = 0;
  for (double r : rates) sum += r;
  const auto [lo, hi] = std::minmax_element(rates.begin(), rates.end());
  std::printf("windows %zu: min %.1f, mean %.1f, max %.1f GFLOP/s (max/min %.2f)\n", rates.size(), *lo,
              sum / static_cast<double>(rates.size()), *hi, *hi / *lo);
  return 0;
}
