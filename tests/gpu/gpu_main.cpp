// The GPU test binary's main: without a visible GPU it says why and exits 77 (ctest's "skipped"),
// else it runs every test, each a CUDA kernel or step against its CPU twin.
#include <gtest/gtest.h>

#include <cstdio>

#include "core/kernels/cuda/cudnn_attention.h"
#include "core/kernels/cuda/device_info.h"
#include "core/kernels/cuda/runtime.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (braid::cuda::device_count() == 0) {
    std::printf("GPU tests skipped: %s\n", braid::cuda::unavailable_reason().c_str());
    return 77;
  }
  const braid::cuda::DeviceProps p = braid::cuda::device_props(0);
  std::printf("GPU tests on %s\n", p.str().c_str());
  std::printf("attention: %s\n", braid::cuda::cudnn_status().c_str());
  const std::string err = braid::cuda::smoke_test(1 << 20);
  if (!err.empty()) {
    std::printf("GPU smoke kernel failed: %s\n", err.c_str());
    return 1;
  }
  return RUN_ALL_TESTS();
}
