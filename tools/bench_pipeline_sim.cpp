// bench_pipeline_sim: simulated bubble (idle) fraction and peak stashed micro-batches of every
// pipeline schedule against theory, from the schedule tables alone (no model runs).
// Usage: bench_pipeline_sim [--trace out.json --schedule zb-h1 --p 4 --m 8 [--v 2]]
// Unit costs: F = 1, whole backward = 2 (zb-h1: input-gradient B = 1 + weight-gradient W = 1).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/error.h"
#include "parallel/chrome_trace.h"
#include "parallel/pipeline_sim.h"

namespace {

const char* arg(int argc, char** argv, const char* name, const char* def) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return def;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    using namespace braid;
    if (const char* path = arg(argc, argv, "--trace", nullptr)) {
      ScheduleSpec s;
      BRAID_USER_CHECK(parse_schedule_kind(arg(argc, argv, "--schedule", "1f1b"), &s.kind),
                       "--schedule: expected gpipe, 1f1b, interleaved-1f1b or zb-h1");
      s.stages = std::atoi(arg(argc, argv, "--p", "4"));
      s.micro_batches = std::atoi(arg(argc, argv, "--m", "8"));
      s.virtual_stages = std::atoi(arg(argc, argv, "--v", "1"));
      SimResult r = simulate_pipeline(build_pipeline_schedule(s));
      write_chrome_trace(path, trace_events(r));
      std::printf("wrote %s: %s p=%d m=%d v=%d, makespan %.0f units, mean idle %.3f\n", path,
                  schedule_kind_name(s.kind), s.stages, s.micro_batches, s.virtual_stages,
                  r.makespan, r.mean_idle_fraction());
      return 0;
    }
    std::printf("%-18s %3s %3s %3s %10s %10s %10s %12s %12s\n", "schedule", "p", "m", "v", "idle",
                "theory", "vs 1f1b", "peak stash0", "peak stash*");
    for (int p : {2, 4})
      for (int m : {4, 8, 16}) {
        double one = 0;
        for (ScheduleKind k : {ScheduleKind::OneFOneB, ScheduleKind::GPipe,
                               ScheduleKind::Interleaved1F1B, ScheduleKind::ZbH1}) {
          ScheduleSpec s{k, p, m, k == ScheduleKind::Interleaved1F1B ? 2 : 1, 0};
          SimResult r = simulate_pipeline(build_pipeline_schedule(s));
          double idle = r.mean_idle_fraction();
          if (k == ScheduleKind::OneFOneB) one = idle;
          // Theory: (p-1)/(m+p-1) for gpipe and 1f1b; (p-1)/(v m+p-1) for interleaving;
          // zb-h1's bubble is (p-1)(F+B-W) = p-1 units of a 3m + p-1 unit step.
          double theory = k == ScheduleKind::Interleaved1F1B ? (p - 1.0) / (2.0 * m + p - 1)
                          : k == ScheduleKind::ZbH1          ? (p - 1.0) / (3.0 * m + p - 1)
                                                             : (p - 1.0) / (m + p - 1);
          int peak_any = 0;
          for (const StageResult& st : r.stages) peak_any = std::max(peak_any, st.peak_stashed);
          std::printf("%-18s %3d %3d %3d %10.3f %10.3f %10.2f %12d %12d\n", schedule_kind_name(k),
                      p, m, s.virtual_stages, idle, theory, idle / one, r.stages[0].peak_stashed,
                      peak_any);
        }
      }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_pipeline_sim: %s\n", e.what());
    return 1;
  }
}
