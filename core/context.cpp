// ExecContext construction.
#include "core/context.h"

namespace braid {

ExecContext::ExecContext(ExecOptions o)
    : device_(o.device), allocator_(std::move(o.allocator)), rng_(o.seed), gemm_(o.gemm) {
  if (!allocator_) {
    BRAID_CHECK(device_.is_cpu(), "no allocator for {} in this build; pass one in ExecOptions",
                device_.str());
    allocator_ = std::make_shared<CachingHostAllocator>();
  }
  BRAID_CHECK(allocator_->device() == device_, "allocator for {} given to a {} context",
              allocator_->device().str(), device_.str());
}

Tensor ExecContext::empty(const Shape& shape, DType dtype, MemCategory cat) {
  return Tensor::empty(allocator_, shape, dtype, cat);
}

Tensor ExecContext::zeros(const Shape& shape, DType dtype, MemCategory cat) {
  Tensor t = empty(shape, dtype, cat);
  t.zero_();
  return t;
}

}  // namespace braid
