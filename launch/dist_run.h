// DistRun: this rank's place in `braid train` (its ParallelDims: the mesh and every group, self
// groups for one process) and the hidden failure hook the MPI tests use.
#pragma once

#include <string>

#include "parallel/parallel_dims.h"

namespace braid {

struct RunConfig;

struct DistRun {
  ParallelDims dims = ParallelDims::single();
  // BRAID_TEST_FAIL_AT_STEP=rank:step[:throw|kill|hang|kill_at_save]: that rank fails at the
  // start of that (1-based) step: throws, raises SIGKILL, or never joins the next collective;
  // kill_at_save: SIGKILL when the step's checkpoint starts. For the failure tests only;
  // fail_rank < 0 disables it.
  int fail_rank = -1;
  int64_t fail_step = 0;
  std::string fail_mode = "throw";

  int rank() const { return dims.rank(); }
};

// Parses BRAID_TEST_FAIL_AT_STEP into d (a malformed value is a braid::UserError).
void read_fail_hook(DistRun& d);
// Runs the hook for `step` (1-based) on this rank, if it is the one; `saving`: at the start
// of the step's checkpoint rather than of the step.
void maybe_fail(const DistRun& d, int64_t step, bool saving = false);

// `braid train`: a plain run (no launcher, one process) trains on self groups (and reads no
// failure hook); under mpirun/srun it creates the World (parallel.init_timeout_s), resolves the
// mesh, builds the communicators and trains on the (dp, tp, pp) mesh. Any error on a rank ends the
// whole job with "braid train: rank N: error: ...".
void run_train(const RunConfig& cfg, const std::string& config_path);

}  // namespace braid
