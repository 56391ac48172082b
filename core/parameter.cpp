// Parameter allocation.
#include "core/parameter.h"
#include "core/profile.h"

namespace braid {

Parameter::Parameter(std::string n, const Shape& shape, bool trainable_)
    : name(std::move(n)), trainable(trainable_) {
  value = Tensor::zeros(shape, DType::F32, Device::cpu(), MemCategory::Weights);
  if (trainable) grad = Tensor::zeros(shape, DType::F32, Device::cpu(), MemCategory::Grads);
}

void Parameter::zero_grad() {
  KernelTimer timer(KernelGroup::Optimizer);
  if (grad.defined()) grad.zero_();
}

}  // namespace braid
