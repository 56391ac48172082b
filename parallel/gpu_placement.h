// GPU placement: which visible GPU a rank uses, from its local rank on the node.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "parallel/communicator.h"

namespace braid {

struct GpuPlacementInput {
  int world_rank = 0;
  // The launcher's local rank and ranks per node (OMPI_COMM_WORLD_LOCAL_RANK/_LOCAL_SIZE,
  // SLURM_LOCALID); empty when the launcher gives none.
  std::optional<int> local_rank;
  std::optional<int> local_size;
  // Every world rank's host name (an all-gather), used when the launcher gives no local rank:
  // the local rank is then the number of lower ranks on the same host.
  std::vector<std::string> hostnames;
  int visible_gpus = 0;  // GPUs this process sees (after CUDA_VISIBLE_DEVICES)
  // CUDA_VISIBLE_DEVICES as set (empty: unset), for the message and the one-GPU-per-rank case.
  std::optional<std::string> cuda_visible_devices;
  std::string hostname;  // this node, for messages
};

struct GpuPlacement {
  int device = 0;  // index among the visible GPUs
  int local_rank = 0;
  int local_size = 1;
  std::string how;  // "local rank 1 of 4 (Open MPI)" ...
};

// The GPU of local rank r is visible GPU r. A launcher that gives each rank its own GPU through
// CUDA_VISIBLE_DEVICES (one entry) gets device 0. Throws braid::UserError naming the host, the
// ranks and the GPUs when a node runs more ranks than it has visible GPUs.
GpuPlacement place_gpu(const GpuPlacementInput& in);

// Every rank's host name in world-rank order (a collective over `world`, host memory).
std::vector<std::string> all_gather_hostnames(Communicator& world, const std::string& hostname);

}  // namespace braid
