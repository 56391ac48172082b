// ParallelDims: the self groups of one process, or the World's mesh groups.
#include "parallel/parallel_dims.h"

#include "core/error.h"
#include "parallel/self_communicator.h"

namespace braid {

ParallelDims ParallelDims::single(bool sequence_parallel) {
  ParallelDims d;
  d.sequence_parallel_ = sequence_parallel;
  auto own = [&d](const char* name) {
    d.owned_.push_back(std::make_unique<SelfCommunicator>(name));
    return d.owned_.back().get();
  };
  d.world_ = own("world");
  d.dp_ = own("dp");
  d.tp_ = own("tp");
  d.pp_ = own("pp");
  d.embedding_ = own("embedding");
  return d;
}

ParallelDims::ParallelDims(Communicator& world, const MeshComms& comms, bool sequence_parallel)
    : mesh_(comms.mesh),
      coord_(comms.coord),
      sequence_parallel_(sequence_parallel),
      world_(&world),
      dp_(comms.dp),
      tp_(comms.tp),
      pp_(comms.pp),
      embedding_(comms.embedding) {
  BRAID_CHECK(dp_ && tp_ && pp_, "ParallelDims: the mesh {} lacks a dp, tp or pp group",
              mesh_.str());
  BRAID_CHECK(world.size() == mesh_.world_size(),
              "ParallelDims: the mesh {} has {} ranks, the world {}", mesh_.str(),
              mesh_.world_size(), world.size());
}

std::string ParallelDims::str() const {
  return world_size() == 1 ? std::string("one process") : mesh_.str();
}

}  // namespace braid
