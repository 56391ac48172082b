// Every mesh layout of the world size: the MPI groups match the pure Mesh functions.
#include <gtest/gtest.h>

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

TEST(MeshGroups, WrongWorldSizeIsAUserError) {
  World& w = world();
  Mesh mesh = Mesh::resolve(1, 1, 1, 1);
  if (w.size() > 1) {
    EXPECT_THROW(w.build_mesh(mesh), UserError);
  }
}

}  // namespace
}  // namespace braid::test
