// Building a rank's ExecContext from the process environment: the one place that reads
// BRAID_GEMM, BRAID_CPU_ISA and BRAID_HUGE_PAGES (core/ takes them as values).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/context.h"
#include "core/device_choice.h"
#include "parallel/communicator.h"

namespace braid {

// The CPU instruction-set level: the machine's own, or BRAID_CPU_ISA=scalar|avx2|avx512|
// avx512_bf16|amx to run the paths of an older CPU. Throws UserError naming the variable for
// an unknown name or a level above this CPU's.
CpuIsa cpu_isa_from_env();

// The GEMM plan at that level: oneDNN by default; BRAID_GEMM=onednn|openblas|reference forces
// a backend (benchmarks, tests). Throws UserError naming the variable for anything else.
GemmPlan gemm_plan_from_env();

// Whether large host blocks go on transparent huge pages: BRAID_HUGE_PAGES=1 (or unset) yes,
// 0 no (to measure the difference). Throws UserError naming the variable for anything else.
HostPages host_pages_from_env();

// A CPU context with the environment's level, GEMM plan and host pages and a fresh caching
// allocator.
std::unique_ptr<ExecContext> make_cpu_context(uint64_t seed = 0);

// The device a run computes on, and why (the first log line).
struct DeviceDecision {
  Device device;
  std::string reason;  // "cuda: NVIDIA H200 (sm_90, ...)", "cpu: no GPU is visible ..."
};
// auto: cuda:0 when the binary has the CUDA backend and a GPU is visible, unless the run
// `needs_pending` ops that have no CUDA kernel yet (the QLoRA base), else the CPU; cpu; cuda:
// cuda:0 or a UserError naming `key` and why there is none.
DeviceDecision choose_device(DeviceChoice choice, const char* key, bool needs_pending = false);

struct RunConfig;
// train.device for `cfg`: choose_device with what the run needs (`braid train`).
DeviceDecision choose_train_device(const RunConfig& cfg);

// Several ranks: every rank must compute on the same kind of device. With train.device auto a
// rank that sees no GPU (a node without its driver, an empty CUDA_VISIBLE_DEVICES) would go on
// over MPI on its CPU while the others build NCCL groups, and the job would fail later naming
// something else. Collective over `world`: returns `d` when all ranks chose a GPU or all the
// CPU, else a UserError on every rank (rank 0's names the ranks on each side and why).
DeviceDecision agree_on_device(const DeviceDecision& d, Communicator& world);

// Several ranks on GPUs: this rank's GPU from its local rank among the visible GPUs
// (parallel/gpu_placement.h; a host-name all-gather over `world` when the launcher gives no
// local rank), a UserError when the node has fewer GPUs than ranks. The reason names the GPU
// (name, UUID, PCI bus) and how it was chosen. Collective over `world` when it all-gathers.
DeviceDecision place_rank_gpu(const DeviceDecision& d, Communicator& world);

// A context on `device`: the CPU's as make_cpu_context, a GPU's with its own stream and
// caching allocator (and TF32 for f32 GEMMs when `tf32`; cuDNN attention's backward in its
// deterministic order unless `deterministic` is false).
std::unique_ptr<ExecContext> make_context(Device device, uint64_t seed = 0, bool tf32 = false,
                                          bool deterministic = true);

}  // namespace braid
