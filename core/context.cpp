// ExecContext construction.
#include "core/context.h"

#include "core/device_memory.h"
#include "core/kernels/cpu/gemm_workspace.h"
#include "core/kernels/cuda/cuda_kernels.h"
#include "core/stream_timeline.h"

namespace braid {

ExecContext::ExecContext(ExecOptions o)
    : device_(o.device),
      allocator_(std::move(o.allocator)),
      rng_(o.seed),
      cpu_isa_(o.cpu_isa),
      gemm_(o.gemm ? *o.gemm : default_gemm_plan(GemmBackend::OneDnn, o.cpu_isa)),
      gemm_workspace_(std::make_unique<GemmWorkspace>()) {
  BRAID_CHECK(cpu_isa_supported(cpu_isa_), "ExecOptions::cpu_isa {}: {}", cpu_isa_name(cpu_isa_),
              cpu_isa_missing(cpu_isa_));
  if (!device_.is_cpu()) {
    const int n = cuda::device_count();
    if (n == 0)
      throw UserError("cannot run on " + device_.str() + ": " + cuda::unavailable_reason());
    BRAID_USER_CHECK(device_.index >= 0 && device_.index < n,
                     "cannot run on {}: {} GPU(s) are visible (cuda:0 to cuda:{})", device_.str(),
                     n, n - 1);
    cuda::set_device(device_.index);
    stream_.handle = cuda::stream_create();
    // Kernel-group times measured on the stream, not as host launch time.
    profiler_.use_device_timeline(std::make_unique<StreamTimeline>(stream_.handle));
  }
  if (!allocator_) {
    if (device_.is_cpu())
      allocator_ = std::make_shared<CachingHostAllocator>(o.host_pages);
    else
      allocator_ = std::make_shared<DeviceCachingAllocator>(cuda_memory_source(device_.index));
  }
  BRAID_CHECK(allocator_->device() == device_, "allocator for {} given to a {} context",
              allocator_->device().str(), device_.str());
}

ExecContext::~ExecContext() {
  backend_state_.reset();
  if (stream_.handle) {
    // Queued kernels may still read tensors that outlive the context's stream; finish them.
    try {
      stream_.synchronize();
    } catch (...) {
    }
    cuda::stream_destroy(stream_.handle);
  }
}

Tensor ExecContext::to_device(const Tensor& t, MemCategory cat) {
  if (!t.defined() || t.device() == device_) return t;
  Tensor out = Tensor::empty(allocator_, t.shape(), t.dtype(), cat);
  if (t.device().is_cpu() && stream_.handle) {
    // Host -> this GPU, ordered on the context's stream: no device-wide wait, and through a
    // page-locked slot, so the host goes on at once; `t` may be freed right after.
    cuda::upload_small(*this, out, t);
    return out;
  }
  out.copy_from(t);
  return out;
}

Tensor ExecContext::empty(const Shape& shape, DType dtype, MemCategory cat) {
  return Tensor::empty(allocator_, shape, dtype, cat);
}

Tensor ExecContext::zeros(const Shape& shape, DType dtype, MemCategory cat) {
  Tensor t = empty(shape, dtype, cat);
  if (stream_.handle == nullptr)
    t.zero_();
  else if (t.nbytes() > 0)  // on the context's stream, as its kernels (no device-wide wait)
    cuda::memset_async(t.raw(), 0, t.nbytes(), stream_.handle);
  return t;
}

}  // namespace braid
