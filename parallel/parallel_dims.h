// ParallelDims: one rank's place in the (dp, tp, pp) mesh, the sequence-parallel degree, and
// every process group it belongs to, built once up front and passed to whatever communicates.
// A one-process run has the same groups, each a SelfCommunicator (parallel/self_communicator.h)
// whose collectives leave the data as it is, so the trainer, the data-parallel buckets, the
// optimizer and the checkpoint writer run the same code in every layout.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "parallel/communicator.h"
#include "parallel/mesh.h"
#include "parallel/world.h"

namespace braid {

class ParallelDims {
 public:
  // One process: the 1 x 1 x 1 mesh; world, dp, tp, pp and embedding are SelfCommunicators
  // owned by this object.
  static ParallelDims single(bool sequence_parallel = false);
  // A rank of a multi-process job: `world` (all ranks) and its mesh groups, both owned by the
  // World, which must outlive this object.
  ParallelDims(Communicator& world, const MeshComms& comms, bool sequence_parallel);
  ParallelDims(ParallelDims&&) = default;
  ParallelDims& operator=(ParallelDims&&) = default;

  const Mesh& mesh() const { return mesh_; }
  const MeshCoord& coord() const { return coord_; }
  int rank() const { return world_->rank(); }  // in the world
  int world_size() const { return world_->size(); }
  bool lead() const { return rank() == 0; }  // the rank that prints, logs and commits
  int dp_size() const { return mesh_.dp(); }
  int tp_size() const { return mesh_.tp(); }
  int pp_size() const { return mesh_.pp(); }
  // Ranks each sequence is split over between the tensor-parallel regions: tp with
  // parallel.sequence_parallel, else 1.
  int sp_size() const { return sequence_parallel_ ? mesh_.tp() : 1; }

  Communicator& world() const { return *world_; }
  Communicator& dp() const { return *dp_; }
  Communicator& tp() const { return *tp_; }
  Communicator& pp() const { return *pp_; }
  // First and last pipeline stage with this rank's (dp, tp) coordinates (GPT-2's tied
  // embedding); just this rank with one stage; null on the middle stages.
  Communicator* embedding() const { return embedding_; }

  // "dp=2 tp=2 pp=1", or "one process".
  std::string str() const;

 private:
  ParallelDims() = default;
  Mesh mesh_ = Mesh::resolve(1, 1, 1, 1);
  MeshCoord coord_;
  bool sequence_parallel_ = false;
  Communicator* world_ = nullptr;
  Communicator* dp_ = nullptr;
  Communicator* tp_ = nullptr;
  Communicator* pp_ = nullptr;
  Communicator* embedding_ = nullptr;
  std::vector<std::unique_ptr<Communicator>> owned_;  // the self groups of a one-process run
};

}  // namespace braid
