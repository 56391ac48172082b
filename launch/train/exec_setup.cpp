// ExecContext construction from the environment.
#include "launch/train/exec_setup.h"

#include <fmt/ranges.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/cuda/runtime.h"
#include "launch/config/config.h"
#include "parallel/gpu_placement.h"
#include "parallel/launch_info.h"
#include "parallel/scalar_reduce.h"

namespace braid {

CpuIsa cpu_isa_from_env() {
  const CpuIsa machine = cpu_isa_detected();
  const char* env = std::getenv("BRAID_CPU_ISA");
  if (env == nullptr || *env == '\0') return machine;
  CpuIsa isa = machine;
  if (!parse_cpu_isa(env, &isa)) {
    std::string names;
    for (CpuIsa i : kAllCpuIsas)
      names += (names.empty() ? "" : ", ") + std::string(cpu_isa_name(i));
    user_error(
        "environment variable BRAID_CPU_ISA='{}' is not an instruction-set level; expected one "
        "of {} (or unset for this CPU's own, {})",
        env, names, cpu_isa_name(machine));
  }
  if (!cpu_isa_supported(isa))
    user_error("environment variable BRAID_CPU_ISA='{}': {}; set a level up to {} or unset it", env,
               cpu_isa_missing(isa), cpu_isa_name(machine));
  return isa;
}

GemmPlan gemm_plan_from_env() {
  GemmBackend backend = GemmBackend::OneDnn;
  if (const char* env = std::getenv("BRAID_GEMM"); env != nullptr && *env != '\0') {
    if (!parse_gemm_backend(env, &backend))
      user_error(
          "environment variable BRAID_GEMM='{}' is not a GEMM backend; expected one of "
          "onednn, openblas, reference (or unset for the automatic choice)",
          env);
  }
  return default_gemm_plan(backend, cpu_isa_from_env());
}

HostPages host_pages_from_env() {
  const char* env = std::getenv("BRAID_HUGE_PAGES");
  if (env == nullptr || *env == '\0' || std::string(env) == "1") return HostPages::Huge;
  if (std::string(env) == "0") return HostPages::Small;
  user_error(
      "environment variable BRAID_HUGE_PAGES='{}': expected 1 (large host blocks on transparent "
      "huge pages, the default) or 0 (4 KiB pages only)",
      env);
}

std::unique_ptr<ExecContext> make_cpu_context(uint64_t seed) {
  ExecOptions o;
  o.host_pages = host_pages_from_env();
  o.cpu_isa = cpu_isa_from_env();
  o.gemm = gemm_plan_from_env();
  o.seed = seed;
  return std::make_unique<ExecContext>(std::move(o));
}

DeviceDecision choose_device(DeviceChoice choice, const char* key, bool needs_pending) {
  if (choice == DeviceChoice::Cpu) return {Device::cpu(), "cpu (" + std::string(key) + ": cpu)"};
  const int gpus = cuda::device_count();
  const int pending = cuda::pending_kernel_count();
  if (choice == DeviceChoice::Cuda) {
    if (gpus == 0)
      user_error("{}: cuda, but {}; use {}: cpu or auto", key, cuda::unavailable_reason(), key);
    return {Device::cuda(0), "cuda:0, " + cuda::device_props(0).str() + " (" + key + ": cuda)"};
  }
  if (gpus == 0) return {Device::cpu(), "cpu (auto: " + cuda::unavailable_reason() + ")"};
  if (pending > 0 && needs_pending)
    return {Device::cpu(), fmt::format("cpu (auto: a GPU is visible, but this run needs ops "
                                       "without a CUDA kernel yet (braid --version lists how "
                                       "many); {}: cuda stops at the first of them)",
                                       key)};
  return {Device::cuda(0), "cuda:0, " + cuda::device_props(0).str() + " (auto: a GPU is visible)"};
}

DeviceDecision choose_train_device(const RunConfig& cfg) {
  return choose_device(cfg.train.device, "train.device",
                       cfg.lora.enabled() && cfg.lora.base_quant != BaseQuant::None);
}

DeviceDecision place_rank_gpu(const DeviceDecision& d, Communicator& world) {
  if (d.device.is_cpu()) return d;
  const LaunchInfo li = launch_info_from_env();
  GpuPlacementInput in;
  in.world_rank = world.rank();
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  in.hostname = host;
  if (li.source == "openmpi" || li.source == "slurm") {
    in.local_rank = li.local_rank;
    in.local_size = li.local_world_size;
  } else {
    in.hostnames = all_gather_hostnames(world, in.hostname);
  }
  in.visible_gpus = cuda::device_count();
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) in.cuda_visible_devices = v;
  const GpuPlacement p = place_gpu(in);
  const cuda::DeviceProps props = cuda::device_props(p.device);
  return {Device::cuda(p.device), fmt::format("cuda:{}, {} (UUID {}, PCI {}; {})", p.device,
                                              props.str(), props.uuid, props.pci_bus, p.how)};
}

DeviceDecision agree_on_device(const DeviceDecision& d, Communicator& world) {
  const int gpu = d.device.is_cpu() ? 0 : 1;
  const std::vector<int> any = all_max_ints(world, {gpu, 1 - gpu});
  if (any[0] == 0 || any[1] == 0) return d;  // all on GPUs or all on CPUs
  const std::vector<std::string> all =
      gather_strings(world, (d.device.is_cpu() ? "C" : "G") + d.reason);
  std::vector<std::string> cpu_ranks, gpu_ranks;
  std::string why;
  for (size_t r = 0; r < all.size(); ++r) {
    const bool cpu = all[r].front() == 'C';
    (cpu ? cpu_ranks : gpu_ranks).push_back(std::to_string(r));
    if (cpu && why.empty()) why = all[r].substr(1);
  }
  if (world.rank() != 0)
    user_error("the ranks chose different devices (this rank: {}); rank 0 lists them", d.reason);
  user_error(
      "the ranks chose different devices: ranks [{}] the CPU, as {}; ranks [{}] a GPU; "
      "every rank must see a GPU (check the driver and CUDA_VISIBLE_DEVICES on those "
      "nodes), or set train.device: cpu",
      fmt::join(cpu_ranks, ", "), why, fmt::join(gpu_ranks, ", "));
}

std::unique_ptr<ExecContext> make_context(Device device, uint64_t seed, bool tf32,
                                          bool deterministic) {
  if (device.is_cpu()) return make_cpu_context(seed);
  ExecOptions o;
  o.device = device;
  o.seed = seed;
  auto ctx = std::make_unique<ExecContext>(std::move(o));
  cuda::set_allow_tf32(*ctx, tf32);
  cuda::set_deterministic(*ctx, deterministic);
  return ctx;
}

}  // namespace braid
