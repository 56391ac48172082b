// DistRun: this rank's place in a multi-process `braid train` (the World, the resolved mesh,
// the DP communicator).
#pragma once

#include <string>

#include "launch/fault_points.h"
#include "parallel/mesh.h"
#include "parallel/world.h"

namespace braid {

struct RunConfig;

struct DistRun {
  World* world = nullptr;
  Mesh mesh = Mesh::resolve(1, 1, 1, 1);
  MeshCoord coord;
  Communicator* dp = nullptr;  // the data-parallel group
  Communicator* tp = nullptr;  // the tensor-parallel group
  Communicator* pp = nullptr;  // the pipeline group
  Communicator* embedding = nullptr;  // first + last stage (GPT-2's tied embedding); null in between

  int rank() const { return world->rank(); }
};

// `braid train`: a plain run (no launcher, one process) trains exactly as train(); under
// mpirun/srun it creates the World (parallel.init_timeout_s), resolves the mesh, builds the
// communicators and trains on the (dp, tp, pp) mesh. Any error on a rank ends the whole job with
// "braid train: rank N: error: ...". `faults`: what --test-fault asked for (empty otherwise).
void run_train(const RunConfig& cfg, const std::string& config_path, const FaultPoints& faults);

}  // namespace braid
