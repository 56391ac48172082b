// World: MPI start-up and shutdown (RAII), the launch info, and the mesh's communicators.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "parallel/communicator.h"
#include "parallel/launch_info.h"
#include "parallel/mesh.h"

namespace braid {

struct WorldOptions {
  double timeout_s = 300.0;       // per operation, see Communicator
  double init_timeout_s = 120.0;  // start-up: communicator creation waits for every rank
  // Collectives as blocking MPI calls on the progress thread (default), or non-blocking
  // calls tested in a loop, sleeping poll_sleep_us between tests while no caller waits
  // (0: spin). Send/recv are always non-blocking.
  bool blocking_collectives = true;
  int poll_sleep_us = 20;
};

// The communicators of one rank's mesh position. Pointers are owned by the World.
struct MeshComms {
  Mesh mesh;
  MeshCoord coord;
  Communicator* tp = nullptr;
  Communicator* dp = nullptr;
  Communicator* pp = nullptr;
  Communicator* embedding = nullptr;  // nullptr on middle pipeline stages
  Communicator* get(MeshGroup g) const;
};

// One per process, created by launch/ (or a test's main) before anything communicates.
// Initialises MPI with MPI_THREAD_MULTIPLE and finalises it in the destructor. If the
// destructor runs while an exception propagates, MPI is left unfinalised on purpose: the
// process then exits non-zero and the launcher tears the job down, instead of this rank waiting
// in MPI_Finalize for peers that wait for it.
class World {
 public:
  World(int* argc, char*** argv, const WorldOptions& options = {});
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  const LaunchInfo& launch() const { return launch_; }
  int rank() const { return launch_.rank; }
  int size() const { return launch_.world_size; }
  const WorldOptions& options() const { return options_; }

  // All ranks.
  Communicator& world() { return *world_; }

  // Collective over all ranks: each passes the world ranks of its own group (group rank =
  // index in the list; groups must not overlap; an empty list means "in no group" and gives
  // nullptr). Bounded by init_timeout_s.
  Communicator* create_group(const std::vector<int>& members, const std::string& name);

  // Every sub-communicator of `mesh` (tp, dp, pp, embedding) for this rank, built up front.
  MeshComms build_mesh(const Mesh& mesh);

  // Prints `message` to stderr and ends the whole job (MPI_Abort). For timeouts and other
  // states no rank can recover from.
  [[noreturn]] void abort_job(const std::string& message) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  WorldOptions options_;
  LaunchInfo launch_;
  Communicator* world_ = nullptr;
  int uncaught_at_start_ = 0;
};

}  // namespace braid
