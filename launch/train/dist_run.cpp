// run_train: self groups for one process, or World + mesh groups.
#include "launch/train/dist_run.h"

#include <fmt/ranges.h>

#include <algorithm>

#include "core/device_memory.h"
#include "launch/train/trainer.h"
#include "parallel/comm_streams.h"
#include "parallel/launch_info.h"
#include "parallel/nccl_communicator.h"
#include "parallel/routed_communicator.h"
#include "parallel/watchdog.h"

namespace braid {

namespace {

// train.device on a rank of several: with parallel.backend: mpi (host memory only) `auto`
// stays on the CPU, and an explicit cuda is refused.
DeviceDecision choose_rank_device(const RunConfig& cfg) {
  if (cfg.parallel.backend == CommBackend::Mpi) {
    if (cfg.train.device == DeviceChoice::Auto)
      return {Device::cpu(), "cpu (auto: parallel.backend: mpi moves host memory only)"};
    BRAID_USER_CHECK(cfg.train.device != DeviceChoice::Cuda,
                     "train.device: cuda with parallel.backend: mpi: braid's MPI groups move host "
                     "memory only; a multi-rank GPU run communicates over NCCL: set "
                     "parallel.backend: nccl or auto");
  }
  return choose_train_device(cfg);
}

// parallel.backend for a rank computing on `device` (auto: NCCL on a GPU), as a config error
// naming the key.
CommBackend resolve_backend(const RunConfig& cfg, Device device) {
  CommBackend b = CommBackend::Mpi;
  try {
    b = resolve_comm_backend(cfg.parallel.backend, !device.is_cpu(), nccl_built());
  } catch (const ConfigError& e) {
    throw ConfigError("parallel." + e.key(), "parallel." + std::string(e.what()));
  }
  BRAID_USER_CHECK(device.is_cpu() || b == CommBackend::Nccl,
                   "train.device chose {} for this rank, but this braid binary was built "
                   "without NCCL and its MPI groups move host memory only; set train.device: "
                   "cpu, or rebuild with NCCL",
                   device.str());
  return b;
}

// A GPU run's groups: a NCCL group over each MPI mesh group (its unique id broadcast over it),
// routed with it (parallel/routed_communicator.h): device tensors over NCCL on the group's
// communication stream, ordered after `ctx`'s stream; host scalars over MPI. Built in the same
// order on every rank; owns the groups, which must outlive the training.
struct DeviceGroups {
  MeshComms comms;
  std::vector<std::unique_ptr<Communicator>> owned;

  DeviceGroups(World& world, const MeshComms& host, ExecContext& ctx, double timeout_s,
               double init_timeout_s)
      : comms(host) {
    auto route = [&](Communicator* h, bool p2p = false) -> Communicator* {
      if (h == nullptr) return nullptr;  // not a member (the embedding pair on middle stages)
      // NCCL's start-up waits for every member (and its socket bootstrap without a limit):
      // one that never arrives must not hang the others, as for the MPI groups.
      Watchdog dog(
          init_timeout_s,
          fmt::format("braid: rank {}: start-up: creating the NCCL communicator of "
                      "group '{}' (world ranks [{}]) did not finish within "
                      "init_timeout_s = {} s; every member must reach start-up on "
                      "its GPU; ending the job",
                      world.rank(), h->name(), fmt::join(h->world_ranks(), ", "), init_timeout_s),
          [&world](const std::string& m) { world.abort_job(m); });
      NcclCommOptions o;
      o.p2p_channels = p2p;  // the pipeline's sends and receives
      o.name = h->name();
      o.world_rank = world.rank();
      o.compute_stream = ctx.stream().handle;
      o.timeout_s = timeout_s;
      o.fatal = [&world](const std::string& message) { world.abort_job(message); };
      owned.push_back(std::make_unique<RoutedCommunicator>(make_nccl_communicator(*h, o), *h));
      return owned.back().get();
    };
    comms.tp = route(host.tp);
    comms.dp = route(host.dp);
    comms.pp = route(host.pp, true);
    comms.embedding = route(host.embedding);
    // An out-of-memory retry returns the allocator's cache only once the communication in
    // flight has finished: within half the timeout (at most 30 s), before the watchdog would
    // end the job naming the transfer instead of the out-of-memory.
    const double settle_s = std::min(30.0, 0.5 * timeout_s);
    set_device_release_guard([settle_s] { return CommStreams::settle_watched(settle_s); });
  }
  ~DeviceGroups() { set_device_release_guard(nullptr); }
  DeviceGroups(const DeviceGroups&) = delete;
  DeviceGroups& operator=(const DeviceGroups&) = delete;
};

}  // namespace

void run_train(const RunConfig& cfg, const std::string& config_path, const FaultPoints& faults) {
  const LaunchInfo li = launch_info_from_env();
  const ParallelConfig& pc = cfg.parallel;
  if (li.world_size == 1) {
    const int dp = pc.dp_degree();
    BRAID_USER_CHECK((dp == 0 || dp == 1) && pc.tp == 1 && pc.pp == 1,
                     "parallel.dp={} tp={} pp={} need {} ranks but braid train runs as one "
                     "process; start it with mpirun -np N (see docs/multinode.md), or set "
                     "parallel.dp=auto",
                     dp == 0 ? std::string("auto") : std::to_string(dp), pc.tp, pc.pp,
                     (dp == 0 ? 1 : dp) * pc.tp * pc.pp);
    DistRun d;
    d.dims = ParallelDims::single(pc.sequence_parallel);
    d.faults = faults;
    train(cfg, config_path, d);
    return;
  }
  WorldOptions wo;
  wo.timeout_s = pc.timeout_s;
  wo.init_timeout_s = pc.init_timeout_s;
  World world(nullptr, nullptr, wo);
  // Outside the try: on an error the job ends (abort_job, in the catch) before the NCCL groups'
  // destructors could wait for an operation whose peers will not come; on success they go first.
  DistRun d;
  std::optional<DeviceGroups> device_groups;
  try {
    d.faults = faults;
    const MeshComms comms =
        world.build_mesh(Mesh::resolve(pc.dp_degree(), pc.tp, pc.pp, world.size()));
    // The device first: a GPU run's NCCL groups are built on this rank's GPU and stream.
    d.device =
        place_rank_gpu(agree_on_device(choose_rank_device(cfg), world.world()), world.world());
    const CommBackend backend = resolve_backend(cfg, d.device->device);
    if (backend == CommBackend::Nccl) {
      d.ctx =
          make_context(d.device->device, cfg.data.seed, cfg.train.tf32, cfg.train.deterministic);
      device_groups.emplace(world, comms, *d.ctx, pc.timeout_s, pc.init_timeout_s);
      d.dims = ParallelDims(world.world(), device_groups->comms, pc.sequence_parallel);
    } else {
      d.dims = ParallelDims(world.world(), comms, pc.sequence_parallel);
    }
    train(cfg, config_path, d);
    device_groups.reset();  // before the context whose stream they order after
  } catch (const std::exception& e) {
    // The others may be inside a collective with this rank: end the whole job now, naming
    // the rank, instead of leaving them to the timeout.
    world.abort_job(fmt::format("braid train: rank {}: error: {}", world.rank(), e.what()));
  }
}

}  // namespace braid
