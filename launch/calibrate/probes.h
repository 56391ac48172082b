// The probes of `braid plan --calibrate`: timed closures over braid's own kernels, and the
// builders that set one up per measured shape (calibrate.cpp picks the shapes). The only code
// that runs kernels for the planner.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/context.h"
#include "core/error.h"
#include "core/profile.h"

namespace braid::plan::probes {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The measurements, timed in interleaved rounds. A shared or virtual machine's speed drifts
// over seconds (on the 2-core KVM guest of docs/benchmarks.md a 512^3 GEMM averaged 86 to 163
// GFLOP/s over 5-second windows, tools/bench_drift.cpp), so timing each kernel in one burst
// gives each rate a different machine state. Each round instead runs every probe for its
// share of the time, so all rates average over the same stretch of time; a rate is total work
// over total time (the mean, which is what a training step sums), after one untimed warm-up
// call per probe.
//
// On a GPU the kernels run after their host calls return, so every timed call is followed by
// a synchronisation of the context's stream: a probe's time is its kernels' time (plus the
// launch gaps a training step has too), never just the time to queue them; the kernel-group
// split comes from the profiler's device timeline (core/profile.h). On the CPU the
// synchronisation is a no-op.
class Probes {
 public:
  // Probes on `device`'s own context (a CUDA device must be visible: ExecContext says why not).
  explicit Probes(Device device = Device::cpu()) {
    ExecOptions o;
    o.device = device;
    ctx_ = std::make_unique<ExecContext>(std::move(o));
  }
  // The context every probe runs its kernels on (and whose profiler splits their time).
  ExecContext& ctx() { return *ctx_; }
  // The clock run() reads (the steady clock unless a test gives a simulated one).
  void set_clock(std::function<Clock::time_point()> now) { now_ = std::move(now); }

  // `fn` does `work` units (FLOPs, bytes, elements) per call; returns the probe's index.
  size_t add(std::function<void()> fn, double work) {
    Probe p;
    p.fn = std::move(fn);
    p.work = work;
    probes_.push_back(std::move(p));
    return probes_.size() - 1;
  }
  // How run() went: timed rounds run (0: the warm-up calls were the measurement), and the
  // shortest run with one timed round (warm-up plus one call of every probe), from `start`.
  struct RunReport {
    int rounds = 0;
    double floor_s = 0;
  };
  // Runs one warm-up call of every probe, then up to `rounds` rounds, so that the run ends by
  // `start` + budget_s. The time left after the warm-up is split evenly over probes and rounds;
  // a probe repeats within its share only while its next call is expected to fit. Rounds are
  // dropped while one call of every probe per round (estimated from the warm-up calls) does not
  // fit in the time left; when not even one fits, the warm-up calls are the measurement (first-
  // touch effects included) and rounds is 0.
  RunReport run(int rounds, double budget_s, Clock::time_point start) {
    const auto since = [&](Clock::time_point t0) {
      return std::chrono::duration<double>(now_() - t0).count();
    };
    double one_round = 0;
    for (Probe& p : probes_) {
      const KernelTimes k0 = ctx_->profiler().times();
      const auto t0 = now_();
      p.fn();
      ctx_->stream().synchronize();
      p.call_estimate = since(t0);
      p.warmup_groups = ctx_->profiler().times() - k0;
      one_round += p.call_estimate;
    }
    const double left = budget_s - since(start);
    RunReport rep;
    rep.floor_s = since(start) + one_round;
    if (one_round > 0 && left < one_round) {
      for (Probe& p : probes_) {
        p.calls = 1;
        p.seconds = p.call_estimate;
        p.groups = p.warmup_groups;
      }
      return rep;
    }
    rep.rounds =
        std::max(1, std::min(rounds, one_round > 0 ? static_cast<int>(left / one_round) : rounds));
    const double share = std::max(0.0, left) /
                         (static_cast<double>(rep.rounds) * std::max<size_t>(1, probes_.size()));
    for (int r = 0; r < rep.rounds; ++r) {
      for (Probe& p : probes_) {
        const KernelTimes k0 = ctx_->profiler().times();
        const auto t0 = now_();
        double dt = 0;
        int64_t calls = 0;
        do {
          p.fn();
          ctx_->stream().synchronize();
          ++calls;
          dt = since(t0);
        } while (dt + dt / static_cast<double>(calls) <= share);
        p.calls += calls;
        p.seconds += dt;
        p.groups += ctx_->profiler().times() - k0;
      }
    }
    return rep;
  }
  // Work units per second.
  double rate(size_t i) const {
    const Probe& p = probes_.at(i);
    BRAID_CHECK(p.calls > 0 && p.seconds > 0, "calibration probe {} did not run", i);
    return p.work * static_cast<double>(p.calls) / p.seconds;
  }
  double seconds_per_call(size_t i) const {
    return probes_.at(i).seconds / static_cast<double>(probes_.at(i).calls);
  }
  // Work units per second of the time the kernel profiler charged to `g` (core/profile.h)
  // while the probe ran: the rate of one kernel group inside a composite probe.
  double group_rate(size_t i, KernelGroup g) const {
    const Probe& p = probes_.at(i);
    const double s = p.groups.seconds[static_cast<int>(g)];
    BRAID_CHECK(p.calls > 0 && s > 0, "calibration probe {} spent no time in {}", i,
                kernel_group_name(g));
    return p.work * static_cast<double>(p.calls) / s;
  }

 private:
  struct Probe {
    std::function<void()> fn;
    double work = 0;
    double seconds = 0;
    double call_estimate = 0;   // the warm-up call's seconds
    KernelTimes warmup_groups;  // and its kernel-group times
    int64_t calls = 0;
    KernelTimes groups;
  };
  std::unique_ptr<ExecContext> ctx_;
  std::function<Clock::time_point()> now_ = [] { return Clock::now(); };
  std::vector<Probe> probes_;
};

// A one-block probe: its index and the work it does, read per kernel group.
struct BlockProbe {
  size_t index = 0;
  double gemm_flops = 0, elementwise_bytes = 0;
};

BlockProbe add_block_probe(Probes& probes, int64_t tokens, int C, bool llama);
size_t add_optimizer_probe(Probes& probes, int64_t params);
size_t add_attention_probe(Probes& probes, int64_t tokens, int64_t T, int64_t D, int64_t group,
                           int64_t C);
size_t add_lm_head_probe(Probes& probes, int64_t N, int64_t C, int64_t V);
size_t add_elementwise_probe(Probes& probes, int64_t N);
size_t add_activation_probe(Probes& probes, int64_t N, bool swiglu);
// 100 add_inplace calls on kCallProbeFloats floats: a parallel region's fixed cost.
inline constexpr int64_t kCallProbeFloats = 16384;
size_t add_call_probe(Probes& probes);
// Stream-like copy of `bytes`: over the OpenMP threads on the CPU, device to device on a GPU.
size_t add_copy_probe(Probes& probes, size_t bytes);
// f32 or bf16 GEMM (n, n) x (n, n) on the probes' device: 2 n^3 FLOPs per call. On the CPU
// through gemm_f32 / gemm_bf16 (f32 output), on a GPU through linear_forward (cuBLASLt; bf16
// output for bf16, true f32 for f32).
size_t add_square_gemm_probe(Probes& probes, int64_t n, bool use_bf16);

}  // namespace braid::plan::probes
