// LaunchInfo: this process's rank, local rank and world size, read from the launcher's environment.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace braid {

struct LaunchInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  // Which launcher the values came from: "openmpi", "slurm", "pmix" or "single".
  std::string source = "single";
};

// Looks up an environment variable; std::nullopt when unset. Tests pass a map instead of getenv.
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;

// Reads, in order of preference, Open MPI's mpirun (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK,
// _LOCAL_SIZE), Slurm's srun (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NTASKS_PER_NODE)
// and bare PMIx (PMIX_RANK with PMIX_SIZE or OMPI_UNIVERSE_SIZE); none of them set means one
// process. Inconsistent values (rank >= size, non-numbers) throw braid::UserError naming the
// variable.
LaunchInfo launch_info_from_env(const EnvLookup& env);
// The same over the process's real environment.
LaunchInfo launch_info_from_env();

}  // namespace braid
