// run_train: self groups for one process, or World + mesh groups.
#include "launch/train/dist_run.h"

#include "launch/train/trainer.h"
#include "parallel/launch_info.h"
#include "parallel/nccl_communicator.h"

namespace braid {

void run_train(const RunConfig& cfg, const std::string& config_path, const FaultPoints& faults) {
  const LaunchInfo li = launch_info_from_env();
  const ParallelConfig& pc = cfg.parallel;
  if (li.world_size == 1) {
    const int dp = pc.dp_degree();
    BRAID_USER_CHECK((dp == 0 || dp == 1) && pc.tp == 1 && pc.pp == 1,
                     "parallel.dp={} tp={} pp={} need {} ranks but braid train runs as one "
                     "process; start it with mpirun -np N (see docs/guide.md), or set "
                     "parallel.dp=auto",
                     dp == 0 ? std::string("auto") : std::to_string(dp), pc.tp, pc.pp,
                     (dp == 0 ? 1 : dp) * pc.tp * pc.pp);
    DistRun d;
    d.dims = ParallelDims::single(pc.sequence_parallel);
    d.faults = faults;
    train(cfg, config_path, d);
    return;
  }
  // parallel.backend: nccl is checked here (a CPU run, a binary without NCCL); the training
  // loop's collectives run over MPI on host memory.
  if (pc.backend == CommBackend::Nccl) {
    try {
      resolve_comm_backend(pc.backend, cfg.train.device != DeviceChoice::Cpu, nccl_built());
    } catch (const ConfigError& e) {
      throw ConfigError("parallel." + e.key(), "parallel." + std::string(e.what()));
    }
    user_error(
        "parallel.backend: nccl: multi-rank training over NCCL is not available in this version "
        "(the NCCL communicator exists, the training loop does not use it yet); set "
        "parallel.backend: mpi or auto");
  }
  WorldOptions wo;
  wo.timeout_s = pc.timeout_s;
  wo.init_timeout_s = pc.init_timeout_s;
  World world(nullptr, nullptr, wo);
  try {
    DistRun d;
    const MeshComms comms =
        world.build_mesh(Mesh::resolve(pc.dp_degree(), pc.tp, pc.pp, world.size()));
    d.dims = ParallelDims(world.world(), comms, pc.sequence_parallel);
    d.faults = faults;
    train(cfg, config_path, d);
  } catch (const std::exception& e) {
    // The others may be inside a collective with this rank: end the whole job now, naming
    // the rank, instead of leaving them to the timeout.
    world.abort_job(fmt::format("braid train: rank {}: error: {}", world.rank(), e.what()));
  }
}

}  // namespace braid
