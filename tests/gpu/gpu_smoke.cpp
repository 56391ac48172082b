// GPU smoke test: runs a kernel round trip when a GPU is present, skips (exit 77) otherwise.
#include <cstdio>

#include "core/kernels/cuda/device_info.h"

int main() {
  const int n = braid::cuda::device_count();
  if (n == 0) {
    std::printf("no GPU visible: skipped\n");
    return 77;
  }
  const std::string err = braid::cuda::smoke_test(1 << 20);
  if (!err.empty()) {
    std::printf("GPU smoke test failed: %s\n", err.c_str());
    return 1;
  }
  std::printf("GPU smoke test passed on %d device(s)\n", n);
  return 0;
}
