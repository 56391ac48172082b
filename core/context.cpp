// ExecContext construction.
#include "core/context.h"

#include "core/kernels/cpu/gemm_workspace.h"

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
  if (!allocator_) {
    BRAID_CHECK(device_.is_cpu(), "no allocator for {} in this build; pass one in ExecOptions",
                device_.str());
    allocator_ = std::make_shared<CachingHostAllocator>();
  }
  BRAID_CHECK(allocator_->device() == device_, "allocator for {} given to a {} context",
              allocator_->device().str(), device_.str());
}

ExecContext::~ExecContext() = default;

Tensor ExecContext::empty(const Shape& shape, DType dtype, MemCategory cat) {
  return Tensor::empty(allocator_, shape, dtype, cat);
}

Tensor ExecContext::zeros(const Shape& shape, DType dtype, MemCategory cat) {
  Tensor t = empty(shape, dtype, cat);
  t.zero_();
  return t;
}

}  // namespace braid
