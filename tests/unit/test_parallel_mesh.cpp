// The rank mesh, launcher environment parsing and ParallelConfig validation (pure, no MPI).
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "data_test_util.h"
#include "parallel/launch_info.h"
#include "parallel/mesh.h"
#include "parallel/parallel_config.h"

namespace braid {
namespace {

using testing::user_error_of;

TEST(Mesh, AutoDpAndProductChecks) {
  EXPECT_EQ(Mesh::resolve(0, 2, 2, 8).dp(), 2);
  EXPECT_EQ(Mesh::resolve(4, 1, 1, 4).world_size(), 4);
  std::string e = user_error_of([] { Mesh::resolve(3, 2, 1, 8); });
  EXPECT_NE(e.find("3 * 2 * 1 = 6"), std::string::npos) << e;
  EXPECT_NE(e.find("8 ranks"), std::string::npos) << e;
  e = user_error_of([] { Mesh::resolve(0, 3, 1, 8); });
  EXPECT_NE(e.find("not divisible by tp * pp"), std::string::npos) << e;
  e = user_error_of([] { Mesh::resolve(1, 0, 1, 1); });
  EXPECT_NE(e.find("parallel.tp is 0"), std::string::npos) << e;
}

// rank = tp + TP * (dp + DP * pp): worked out by hand for (dp 2, tp 3, pp 2), 12 ranks.
TEST(Mesh, CoordinatesTpFastestThenDpThenPp) {
  Mesh m = Mesh::resolve(2, 3, 2, 12);
  EXPECT_EQ(m.coord(0), (MeshCoord{0, 0, 0}));
  EXPECT_EQ(m.coord(1), (MeshCoord{0, 1, 0}));
  EXPECT_EQ(m.coord(3), (MeshCoord{1, 0, 0}));
  EXPECT_EQ(m.coord(5), (MeshCoord{1, 2, 0}));
  EXPECT_EQ(m.coord(6), (MeshCoord{0, 0, 1}));
  EXPECT_EQ(m.coord(11), (MeshCoord{1, 2, 1}));
  for (int r = 0; r < 12; ++r) EXPECT_EQ(m.rank(m.coord(r)), r);
  EXPECT_THROW(m.coord(12), Error);
}

TEST(Mesh, GroupMembershipsAllThreeDims) {
  Mesh m = Mesh::resolve(2, 3, 2, 12);
  // Rank 10 = (dp 1, tp 1, pp 1).
  EXPECT_EQ(m.group(MeshGroup::Tp, 10), (std::vector<int>{9, 10, 11}));
  EXPECT_EQ(m.group(MeshGroup::Dp, 10), (std::vector<int>{7, 10}));
  EXPECT_EQ(m.group(MeshGroup::Pp, 10), (std::vector<int>{4, 10}));
  EXPECT_EQ(m.group(MeshGroup::Embedding, 10), (std::vector<int>{4, 10}));
  // Every group kind partitions the ranks, and each member computes the same list.
  for (MeshGroup g : {MeshGroup::Tp, MeshGroup::Dp, MeshGroup::Pp}) {
    std::multiset<int> seen;
    std::set<std::vector<int>> groups;
    for (int r = 0; r < 12; ++r) {
      std::vector<int> mine = m.group(g, r);
      groups.insert(mine);
      for (int x : mine) EXPECT_EQ(m.group(g, x), mine) << mesh_group_name(g) << " rank " << r;
    }
    for (const auto& grp : groups) seen.insert(grp.begin(), grp.end());
    EXPECT_EQ(seen.size(), 12u) << mesh_group_name(g);
    EXPECT_EQ(std::set<int>(seen.begin(), seen.end()).size(), 12u) << mesh_group_name(g);
  }
  EXPECT_EQ(m.group(MeshGroup::Tp, 0).size(), 3u);
}

TEST(Mesh, EmbeddingGroupIsFirstAndLastStage) {
  Mesh m = Mesh::resolve(1, 2, 4, 8);  // stages: {0,1} {2,3} {4,5} {6,7}
  EXPECT_EQ(m.group(MeshGroup::Embedding, 1), (std::vector<int>{1, 7}));
  EXPECT_EQ(m.group(MeshGroup::Embedding, 6), (std::vector<int>{0, 6}));
  EXPECT_TRUE(m.group(MeshGroup::Embedding, 3).empty());
  EXPECT_TRUE(m.group(MeshGroup::Embedding, 4).empty());
  Mesh flat = Mesh::resolve(0, 1, 1, 3);
  EXPECT_EQ(flat.group(MeshGroup::Embedding, 2), (std::vector<int>{2}));
  EXPECT_EQ(flat.group(MeshGroup::Dp, 2), (std::vector<int>{0, 1, 2}));
}

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(LaunchInfo, OpenMpiSlurmPmixAndSingle) {
  LaunchInfo li = launch_info_from_env(env_of({}));
  EXPECT_EQ(li.source, "single");
  EXPECT_EQ(li.world_size, 1);
  li = launch_info_from_env(env_of({{"OMPI_COMM_WORLD_RANK", "3"},
                                    {"OMPI_COMM_WORLD_SIZE", "4"},
                                    {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                    {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                    {"SLURM_PROCID", "0"}}));
  EXPECT_EQ(li.source, "openmpi");
  EXPECT_EQ(li.rank, 3);
  EXPECT_EQ(li.world_size, 4);
  EXPECT_EQ(li.local_rank, 1);
  EXPECT_EQ(li.local_world_size, 2);
  li = launch_info_from_env(env_of({{"SLURM_PROCID", "5"},
                                    {"SLURM_NTASKS", "8"},
                                    {"SLURM_LOCALID", "1"},
                                    {"SLURM_NTASKS_PER_NODE", "4(x2)"}}));
  EXPECT_EQ(li.source, "slurm");
  EXPECT_EQ(li.rank, 5);
  EXPECT_EQ(li.local_rank, 1);
  EXPECT_EQ(li.local_world_size, 1);  // uneven spelling reads as unknown
  li = launch_info_from_env(env_of({{"PMIX_RANK", "2"}, {"OMPI_UNIVERSE_SIZE", "3"}}));
  EXPECT_EQ(li.source, "pmix");
  EXPECT_EQ(li.rank, 2);
  EXPECT_EQ(li.world_size, 3);
}

TEST(LaunchInfo, BadValuesNameTheVariable) {
  std::string e = user_error_of([] {
    launch_info_from_env(env_of({{"OMPI_COMM_WORLD_RANK", "x"}, {"OMPI_COMM_WORLD_SIZE", "2"}}));
  });
  EXPECT_NE(e.find("OMPI_COMM_WORLD_RANK='x'"), std::string::npos) << e;
  e = user_error_of([] {
    launch_info_from_env(env_of({{"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "4"}}));
  });
  EXPECT_NE(e.find("SLURM_PROCID=4 is not below SLURM_NTASKS=4"), std::string::npos) << e;
  e = user_error_of([] { launch_info_from_env(env_of({{"PMIX_RANK", "0"}})); });
  EXPECT_NE(e.find("PMIX_SIZE"), std::string::npos) << e;
}

TEST(ParallelConfig, DefaultsValidateAndBadValuesNameTheKey) {
  ParallelConfig c;
  c.validate();
  EXPECT_EQ(c.dp_degree(), 0);
  EXPECT_EQ(c.allreduce_dtype_value(), DType::F32);
  auto key_of = [](ParallelConfig bad) {
    try {
      bad.validate();
    } catch (const ConfigError& e) {
      return e.key();
    }
    return std::string("(none)");
  };
  ParallelConfig b = c;
  b.dp = 0;
  EXPECT_EQ(key_of(b), "dp");
  b = c;
  b.dp = 2;
  b.validate();
  EXPECT_EQ(b.dp_degree(), 2);
  b = c;
  b.timeout_s = 0;
  EXPECT_EQ(key_of(b), "timeout_s");
  b = c;
  b.first_bucket_mb = 30;
  EXPECT_EQ(key_of(b), "first_bucket_mb");
  b = c;
  b.allreduce_dtype = "i32";
  EXPECT_EQ(key_of(b), "allreduce_dtype");
  b = c;
  b.schedule = "2f2b";
  EXPECT_EQ(key_of(b), "schedule");
  b = c;
  b.virtual_stages = 2;
  EXPECT_EQ(key_of(b), "virtual_stages");
  b.schedule = "interleaved-1f1b";
  b.validate();
}

}  // namespace
}  // namespace braid
