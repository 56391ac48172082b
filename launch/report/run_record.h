// What a run directory records about how it was made: braid version and commit, the machine
// (CPU model, instruction sets, threads, GEMM library), and the config of each attempt.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/kernels/gemm_plan.h"
#include "launch/config/train_config.h"

namespace braid {

// braid's version ("0.1.0") and the git commit it was configured from ("unknown" in a source
// tree without git, e.g. a release tarball; -DBRAID_GIT_COMMIT=... sets it there).
std::string braid_version();
std::string braid_git_commit();

// This machine as training sees it.
struct MachineInfo {
  std::string cpu_model;     // /proc/cpuinfo "model name"
  std::string isa;           // the widest vector ISA the CPU has: "AMX", "AVX-512", "AVX2", ...
  std::string isa_cap;       // ONEDNN_MAX_CPU_ISA when set (it caps what oneDNN uses), else ""
  int threads = 0;           // OpenMP threads of this run
  std::string gemm_backend;  // "onednn", "openblas" or "reference"
};
MachineInfo machine_info(const GemmPlan& gemm);

// Appends one attempt (start or resume) to <run_dir>/run.json: version, commit, machine, the
// step it started at, the time, and the parallel layout.
struct ParallelLayout {
  int ranks = 1, dp = 1, tp = 1, pp = 1;
  int zero = 0;  // ZeRO stage of the optimizer state
  // Per world rank, in rank order: its host name and its device with why ("cuda:1, NVIDIA
  // H200 (...; UUID ..., PCI ...; local rank 1)", "cpu (auto: ...)"). Empty: not recorded.
  std::vector<std::pair<std::string, std::string>> rank_devices;
};
void append_run_record(const std::filesystem::path& run_dir, const MachineInfo& m,
                       int64_t start_step, const ParallelLayout& layout = {});

// Writes <run_dir>/config.yaml on a fresh run. On a resume whose config differs from the
// saved one it keeps config.yaml as it was, saves the new one as config.step-NNNNNNNN.yaml
// beside it and returns a warning listing the changed keys; otherwise returns "".
std::string record_run_config(const RunConfig& cfg, const std::filesystem::path& run_dir,
                              int64_t start_step);

}  // namespace braid
