// The GEMM workspace's slot pool.
#include "core/kernels/cpu/gemm_workspace.h"

namespace braid {

GemmWorkspace::Lease GemmWorkspace::lease() {
  std::unique_ptr<GemmScratch> s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_.empty()) {
      s = std::move(free_.back());
      free_.pop_back();
    } else {
      ++made_;
    }
  }
  if (!s) s = std::make_unique<GemmScratch>();
  return Lease(*this, std::move(s));
}

size_t GemmWorkspace::slots() const {
  std::lock_guard<std::mutex> lock(mu_);
  return made_;
}

void GemmWorkspace::give_back(std::unique_ptr<GemmScratch> s) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(std::move(s));
}

}  // namespace braid
