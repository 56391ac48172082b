// CUDA kernels not written yet: each fails naming the op, so a GPU run stops with a clear message
// at the first op that has no kernel instead of reaching a host loop with device pointers. An op
// leaves this list when its .cu/.cpp pair lands (core/kernels/cuda/cuda_kernels.h).
#include <string_view>
#include <vector>

#include "core/kernels/cuda/cuda_kernels.h"

namespace braid::cuda {

namespace {
[[maybe_unused]] [[noreturn]] void pending(const char* op) {
  throw UserError(
      fmt::format("no CUDA kernel for {} yet: run this configuration with train.device: cpu", op));
}

// The ops below, by name (tests/unit/test_device_memory.cpp checks this list against the
// stubs): none at present. `device: auto` picks a GPU regardless, and a run that reaches one
// of them stops naming it.
const std::vector<std::string_view> kPendingOps = {};
}  // namespace

int pending_kernel_count() { return static_cast<int>(kPendingOps.size()); }

}  // namespace braid::cuda
