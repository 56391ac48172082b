// f32 copies of 16-bit tensors for mixed-dtype CUDA calls (core/kernels/cuda/f32_staging.h).
#include "core/kernels/cuda/f32_staging.h"

#include "core/kernels/cuda/cuda_kernels.h"

namespace braid::cuda {

Tensor F32Staging::in(const Tensor& t) {
  if (!t.defined() || t.dtype() == DType::F32) return t;
  Tensor f = ctx_.empty(t.shape(), DType::F32, MemCategory::Workspace);
  cuda::cast(ctx_, f, t);
  return f;
}

Tensor F32Staging::out(const Tensor& t, bool keep_contents) {
  if (!t.defined() || t.dtype() == DType::F32) return t;
  Tensor f = ctx_.empty(t.shape(), DType::F32, MemCategory::Workspace);
  if (keep_contents) cuda::cast(ctx_, f, t);
  outs_.emplace_back(t, f);
  return f;
}

void F32Staging::finish() {
  for (auto& [target, f] : outs_) cuda::cast(ctx_, target, f);
  outs_.clear();
}

}  // namespace braid::cuda
