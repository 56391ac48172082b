// GPU placement from fake launcher values and host names: local rank -> visible GPU, the
// one-GPU-per-rank CUDA_VISIBLE_DEVICES case, and the error when a node has too few GPUs.
#include <gtest/gtest.h>

#include "core/error.h"
#include "parallel/gpu_placement.h"
#include "parallel/self_communicator.h"

namespace braid {
namespace {

TEST(GpuPlacement, LauncherLocalRankPicksThatGpu) {
  GpuPlacementInput in;
  in.world_rank = 6;
  in.local_rank = 2;
  in.local_size = 4;
  in.visible_gpus = 4;
  const GpuPlacement p = place_gpu(in);
  EXPECT_EQ(p.device, 2);
  EXPECT_EQ(p.local_size, 4);
  EXPECT_NE(p.how.find("local rank 2 of 4"), std::string::npos) << p.how;
}

TEST(GpuPlacement, HostNamesGiveTheLocalRankWithoutALauncher) {
  GpuPlacementInput in;
  in.hostnames = {"a", "b", "a", "b", "a"};
  in.visible_gpus = 3;
  in.world_rank = 4;  // third rank on host a
  EXPECT_EQ(place_gpu(in).device, 2);
  in.world_rank = 3;  // second on b
  const GpuPlacement p = place_gpu(in);
  EXPECT_EQ(p.device, 1);
  EXPECT_EQ(p.local_size, 2);
}

TEST(GpuPlacement, TooFewGpusOnANodeIsAClearError) {
  GpuPlacementInput in;
  in.hostname = "node7";
  in.world_rank = 1;
  in.local_rank = 1;
  in.local_size = 4;
  in.visible_gpus = 2;
  in.cuda_visible_devices = "0,1";
  try {
    place_gpu(in);
    FAIL() << "no error";
  } catch (const UserError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("host node7 runs 4 ranks but sees 2 GPUs"), std::string::npos) << m;
    EXPECT_NE(m.find("CUDA_VISIBLE_DEVICES=0,1"), std::string::npos) << m;
  }
  in.visible_gpus = 0;
  EXPECT_THROW(place_gpu(in), UserError);
}

TEST(GpuPlacement, OneGpuPerRankFromCudaVisibleDevices) {
  GpuPlacementInput in;
  in.local_rank = 3;
  in.local_size = 4;
  in.visible_gpus = 1;
  in.cuda_visible_devices = "GPU-5e1c";
  EXPECT_EQ(place_gpu(in).device, 0);
  in.cuda_visible_devices.reset();  // one GPU for four ranks, not bound by the launcher
  EXPECT_THROW(place_gpu(in), UserError);
}

TEST(GpuPlacement, HostNameAllGatherOnOneRank) {
  SelfCommunicator world("world", 0, 10.0);
  EXPECT_EQ(all_gather_hostnames(world, "gpu-node-01"), std::vector<std::string>{"gpu-node-01"});
}

}  // namespace
}  // namespace braid
