// Every mesh layout of the world size: the MPI groups match the pure Mesh functions.
#include <gtest/gtest.h>

#include "launch/train/exec_setup.h"
#include "tests/mpi/mpi_test_util.h"

namespace braid::test {
namespace {

TEST(MeshGroups, EveryLayoutMatchesThePureMesh) {
  World& w = world();
  for (int tp = 1; tp <= w.size(); ++tp)
    for (int pp = 1; pp <= w.size(); ++pp) {
      if (w.size() % (tp * pp) != 0) continue;
      Mesh mesh = Mesh::resolve(0, tp, pp, w.size());
      MeshComms mc = w.build_mesh(mesh);
      EXPECT_EQ(mc.coord, mesh.coord(w.rank()));
      for (MeshGroup g : {MeshGroup::Tp, MeshGroup::Dp, MeshGroup::Pp, MeshGroup::Embedding}) {
        std::vector<int> expect = mesh.group(g, w.rank());
        Communicator* c = mc.get(g);
        if (expect.empty()) {
          EXPECT_EQ(c, nullptr);
          continue;
        }
        ASSERT_NE(c, nullptr) << mesh.str() << " " << mesh_group_name(g);
        EXPECT_EQ(c->world_ranks(), expect) << mesh.str() << " " << mesh_group_name(g);
        // The sum of the members' world ranks proves MPI grouped the same processes.
        Tensor x = Tensor::from_vector_i32({w.rank()}, {1});
        c->all_reduce(x, ReduceOp::Sum).wait();
        int sum = 0;
        for (int r : expect) sum += r;
        EXPECT_EQ(x.data<int32_t>()[0], sum) << mesh.str() << " " << mesh_group_name(g);
      }
    }
}

// A job whose ranks chose different kinds of device (one node without a visible GPU) stops at
// start-up on every rank, rank 0 naming the ranks on each side; agreeing ranks go on.
TEST(MeshGroups, RanksMustAgreeOnTheKindOfDevice) {
  World& w = world();
  const DeviceDecision cpu{Device::cpu(), "cpu (auto: no GPU is visible)"};
  const DeviceDecision gpu{Device::cuda(0), "cuda:0, a test GPU (auto: a GPU is visible)"};
  EXPECT_TRUE(agree_on_device(cpu, w.world()).device.is_cpu());
  EXPECT_FALSE(agree_on_device(gpu, w.world()).device.is_cpu());
  if (w.size() < 2) return;
  const DeviceDecision& mine = w.rank() == w.size() - 1 ? cpu : gpu;  // the last rank sees none
  try {
    agree_on_device(mine, w.world());
    ADD_FAILURE() << "ranks on a GPU and a CPU were let through";
  } catch (const UserError& e) {
    const std::string msg = e.what();
    if (w.rank() == 0) {
      EXPECT_NE(msg.find(fmt::format("ranks [{}] the CPU, as cpu (auto: no GPU is visible)",
                                     w.size() - 1)),
                std::string::npos)
          << msg;
      EXPECT_NE(msg.find("] a GPU"), std::string::npos) << msg;
    } else {
      EXPECT_NE(msg.find("rank 0 lists them"), std::string::npos) << msg;
    }
  }
}

TEST(MeshGroups, WrongWorldSizeIsAUserError) {
  World& w = world();
  Mesh mesh = Mesh::resolve(1, 1, 1, 1);
  if (w.size() > 1) {
    EXPECT_THROW(w.build_mesh(mesh), UserError);
  }
}

}  // namespace
}  // namespace braid::test
