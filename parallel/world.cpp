// World: MPI initialisation, communicator creation under the start-up watchdog, finalisation.
#include "parallel/world.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <exception>

#include "core/error.h"
#include "parallel/inflight_report.h"
#include "parallel/mpi_communicator.h"
#include "parallel/watchdog.h"

namespace braid {

struct World::Impl {
  MpiReduceOps ops;
  std::vector<std::unique_ptr<MpiCommunicator>> comms;
};

Communicator* MeshComms::get(MeshGroup g) const {
  switch (g) {
    case MeshGroup::Tp:
      return tp;
    case MeshGroup::Dp:
      return dp;
    case MeshGroup::Pp:
      return pp;
    case MeshGroup::Embedding:
      return embedding;
  }
  return nullptr;
}

World::World(int* argc, char*** argv, const WorldOptions& options)
    : impl_(std::make_unique<Impl>()),
      options_(options),
      uncaught_at_start_(std::uncaught_exceptions()) {
  BRAID_CHECK(options.timeout_s > 0 && options.init_timeout_s > 0,
              "timeouts must be > 0 (timeout_s {}, init_timeout_s {})", options.timeout_s,
              options.init_timeout_s);
  launch_ = launch_info_from_env();
  int initialized = 0;
  MPI_Initialized(&initialized);
  BRAID_CHECK(!initialized, "MPI is already initialised; create one World per process");
  int provided = 0;
  int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  BRAID_CHECK(rc == MPI_SUCCESS, "MPI_Init_thread failed: {}", mpi_error_string(rc));
  if (provided < MPI_THREAD_MULTIPLE) {
    MPI_Finalize();
    BRAID_CHECK(false,
                "the MPI library provides thread level {} but braid's progress threads "
                "need MPI_THREAD_MULTIPLE ({}); use an MPI built with thread support",
                provided, MPI_THREAD_MULTIPLE);
  }
  int mpi_rank = 0, mpi_size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &mpi_size);
  if (launch_.source == "single" && mpi_size > 1) {
    // A launcher whose variables we do not read (MPICH's hydra, ...): MPI knows the layout.
    launch_.rank = mpi_rank;
    launch_.world_size = mpi_size;
    launch_.source = "mpi";
  }
  if (mpi_rank != launch_.rank || mpi_size != launch_.world_size) {
    std::string msg =
        fmt::format("the {} launcher variables say rank {} of {}, but MPI says rank {} of {}",
                    launch_.source, launch_.rank, launch_.world_size, mpi_rank, mpi_size);
    abort_job("braid: " + msg);
  }
  impl_->ops.create();
  inflight::install_signal_report();
  std::vector<int> all(static_cast<size_t>(mpi_size));
  for (int i = 0; i < mpi_size; ++i) all[static_cast<size_t>(i)] = i;
  world_ = create_group(all, "world");
}

World::~World() {
  if (std::uncaught_exceptions() > uncaught_at_start_) {
    // Unwinding: leave the progress threads and MPI as they are (see the class comment).
    (void)impl_.release();
    return;
  }
  impl_->comms.clear();
  inflight::restore_signal_handlers();
  impl_->ops.free();
  MPI_Finalize();
}

void World::abort_job(const std::string& message) const {
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();  // MPI_Abort does not return; this is for an MPI that does
}

Communicator* World::create_group(const std::vector<int>& members, const std::string& name) {
  int key = 0;
  bool found = members.empty();
  for (size_t i = 0; i < members.size(); ++i) {
    BRAID_CHECK(members[i] >= 0 && members[i] < size(),
                "group '{}': member {} outside world ranks 0..{}", name, members[i], size() - 1);
    if (members[i] == rank()) {
      key = static_cast<int>(i);
      found = true;
    }
  }
  BRAID_CHECK(found, "group '{}' = [{}] does not contain this rank {}", name,
              fmt::join(members, ", "), rank());
  MPI_Comm comm = MPI_COMM_NULL;
  {
    // Splitting waits for every rank; one that never arrives must not hang the others.
    Watchdog dog(
        options_.init_timeout_s,
        fmt::format("braid: rank {}: start-up: creating the '{}' communicator (world "
                    "ranks [{}]) did not finish within init_timeout_s = {} s; every "
                    "one of the {} ranks must reach start-up; ending the job",
                    rank(), name, fmt::join(members, ", "), options_.init_timeout_s, size()),
        [this](const std::string& m) { abort_job(m); });
    int color = members.empty() ? MPI_UNDEFINED : members[0];
    int rc = MPI_Comm_split(MPI_COMM_WORLD, color, key, &comm);
    BRAID_CHECK(rc == MPI_SUCCESS, "MPI_Comm_split for group '{}' failed: {}", name,
                mpi_error_string(rc));
  }
  if (members.empty()) return nullptr;
  auto c = std::make_unique<MpiCommunicator>(
      comm, name, members, rank(), options_.timeout_s, &impl_->ops,
      [this](const std::string& m) { abort_job(m); },
      MpiProgress{options_.blocking_collectives, options_.poll_sleep_us});
  impl_->comms.push_back(std::move(c));
  return impl_->comms.back().get();
}

MeshComms World::build_mesh(const Mesh& mesh) {
  BRAID_USER_CHECK(mesh.world_size() == size(),
                   "the mesh {} has {} ranks but the job has {}; dp * tp * pp must equal the "
                   "number of ranks",
                   mesh.str(), mesh.world_size(), size());
  MeshComms out{mesh, mesh.coord(rank())};
  // The same order on every rank: each split is a collective over the world.
  out.tp = create_group(mesh.group(MeshGroup::Tp, rank()), "tp");
  out.dp = create_group(mesh.group(MeshGroup::Dp, rank()), "dp");
  out.pp = create_group(mesh.group(MeshGroup::Pp, rank()), "pp");
  out.embedding = create_group(mesh.group(MeshGroup::Embedding, rank()), "embedding");
  return out;
}

}  // namespace braid
