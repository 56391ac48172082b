// ExecContext: everything a kernel or module needs to run on one rank's device, passed in
// explicitly (no process-wide state in core/): the device, a stream (a no-op handle on the
// CPU, a cudaStream_t with the GPU backend), the allocator, the kernel-group profiler, an RNG,
// the CPU instruction-set level the kernels may use, the GEMM plan and the GEMM workspace
// (widening buffers, oneDNN primitives). launch/ makes one per rank (launch/train/exec_setup.h);
// tests make their own.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "core/device.h"
#include "core/kernels/cpu/cpu_isa.h"
#include "core/kernels/cuda/runtime.h"
#include "core/kernels/gemm_plan.h"
#include "core/memory.h"
#include "core/profile.h"
#include "core/random.h"
#include "core/tensor.h"

namespace braid {

// A queue of device work. On the CPU kernels run synchronously on the calling thread (and its
// OpenMP team), so the handle is null and synchronize() returns at once; on a GPU it is the
// context's cudaStream_t, and synchronize() waits for everything queued on it.
struct Stream {
  void* handle = nullptr;
  void synchronize() const {
    if (handle) cuda::stream_synchronize(handle);
  }
};

// State a device backend keeps per context (the CUDA backend's cuBLASLt handle, workspace and
// plan caches, core/kernels/cuda/cuda_state.h), made by the backend on first use.
class BackendState {
 public:
  virtual ~BackendState() = default;
};

class GemmWorkspace;  // core/kernels/cpu/gemm_workspace.h

struct ExecOptions {
  Device device = Device::cpu();
  // The highest instruction set the CPU kernels may use: the machine's own by default; lower
  // runs the paths an older CPU takes (tests run each). Above the machine's is an error.
  CpuIsa cpu_isa = cpu_isa_detected();
  // Unset: default_gemm_plan(GemmBackend::OneDnn, cpu_isa).
  std::optional<GemmPlan> gemm;
  uint64_t seed = 0;  // the context's RNG (dropout, sampling)
  // null: a new CachingHostAllocator for the CPU (on `host_pages`), a new
  // DeviceCachingAllocator for a GPU
  std::shared_ptr<Allocator> allocator;
  HostPages host_pages = HostPages::Huge;
};

class ExecContext {
 public:
  explicit ExecContext(ExecOptions options = {});
  ExecContext(const ExecContext&) = delete;
  ExecContext& operator=(const ExecContext&) = delete;
  ~ExecContext();

  Device device() const { return device_; }
  Stream& stream() { return stream_; }
  Allocator& allocator() { return *allocator_; }
  const std::shared_ptr<Allocator>& allocator_ptr() const { return allocator_; }
  Profiler& profiler() { return profiler_; }
  Rng& rng() { return rng_; }
  CpuIsa cpu_isa() const { return cpu_isa_; }
  const GemmPlan& gemm() const { return gemm_; }
  GemmWorkspace& gemm_workspace() { return *gemm_workspace_; }
  // The device backend's per-context state (null until the backend makes it).
  BackendState* backend_state() { return backend_state_.get(); }
  void set_backend_state(std::unique_ptr<BackendState> s) { backend_state_ = std::move(s); }

  // `t` itself when it is already on this context's device, else a copy there from the
  // context's allocator (data batches, checkpoints, tests). A host tensor's copy to this GPU is
  // queued on the context's stream (kernels queued after it see the data); `t` may be reused
  // as soon as this returns.
  Tensor to_device(const Tensor& t, MemCategory cat = MemCategory::Activations);

  // Tensors on this context's device, from its allocator.
  Tensor empty(const Shape& shape, DType dtype = DType::F32,
               MemCategory cat = MemCategory::Activations);
  // Zeroed in stream order on a GPU: kernels queued after it, and copies (which wait for the
  // device), see the zeros.
  Tensor zeros(const Shape& shape, DType dtype = DType::F32,
               MemCategory cat = MemCategory::Activations);

 private:
  Device device_;
  Stream stream_;
  std::shared_ptr<Allocator> allocator_;
  Profiler profiler_;
  Rng rng_;
  CpuIsa cpu_isa_;
  GemmPlan gemm_;
  std::unique_ptr<GemmWorkspace> gemm_workspace_;
  std::unique_ptr<BackendState> backend_state_;  // destroyed before the stream
};

}  // namespace braid
