// gpu_calibrate: `braid plan --calibrate --device cuda[:N]` for a machine that builds only
// braid_core (tools/gpu_check.sh's core-only build has no MPI, YAML or CLI11, so no braid
// binary): the same probes (launch/calibrate/) and the same profile (gpu_profile.h), written to
// --out and printed as braid plan prints it. The profile feeds `braid plan --device-profile`.
//   gpu_calibrate --out PROFILE.json [--device cuda[:N]] [--seconds S] [--rounds R]
// Exits 77 (skipped) when no GPU can be used, 1 on another error, and writes nothing then.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "core/error.h"
#include "core/kernels/cuda/runtime.h"
#include "launch/calibrate/calibrate.h"
#include "launch/plan/calibrate_report.h"
#include "launch/plan/gpu_profile.h"
#include "launch/plan/gpu_table.h"

using namespace braid;

int main(int argc, char** argv) {
  std::string device = "cuda", out;
  double seconds = 0;
  int rounds = 0;
  for (int i = 1; i < argc; i += 2) {
    const std::string k = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "gpu_calibrate: %s needs a value\n", k.c_str());
      return 2;
    }
    const std::string v = argv[i + 1];
    if (k == "--device")
      device = v;
    else if (k == "--out")
      out = v;
    else if (k == "--seconds")
      seconds = std::atof(v.c_str());
    else if (k == "--rounds")
      rounds = std::atoi(v.c_str());
    else {
      std::fprintf(stderr, "gpu_calibrate: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  if (out.empty()) {
    std::fprintf(stderr, "gpu_calibrate: give --out PROFILE.json\n");
    return 2;
  }
  try {
    if (plan::parse_calibrate_device(device).is_cpu()) {
      std::fprintf(stderr, "gpu_calibrate: --device %s; this tool calibrates a GPU (cuda[:N])\n",
                   device.c_str());
      return 2;
    }
    if (cuda::device_count() == 0) {
      std::printf("gpu_calibrate: skipped: %s\n", cuda::unavailable_reason().c_str());
      return 77;
    }
    plan::CalibrateOptions opt = plan::CalibrateOptions::gpu(device);
    if (seconds > 0) opt.total_seconds = seconds;
    if (rounds > 0) opt.rounds = rounds;
    const plan::CalibrationRun run = plan::calibrate_machine(opt);
    plan::save_device_profile(run.profile, out);
    std::fputs(plan::calibration_text(run, opt, out).c_str(), stdout);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_calibrate: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
