// DistRun: this rank's place in `braid train` (its ParallelDims: the mesh and every group, self
// groups for one process) and the faults a test asked it to inject (launch/train/fault_points.h).
#pragma once

#include <string>

#include "launch/train/fault_points.h"
#include "parallel/parallel_dims.h"

namespace braid {

struct RunConfig;

struct DistRun {
  ParallelDims dims = ParallelDims::single();
  FaultPoints faults;  // empty unless `--test-fault` was given

  int rank() const { return dims.rank(); }
};

// The fail_at_step fault for `step` (1-based) on this rank, if it is the one; `saving`: at the
// start of the step's checkpoint rather than of the step.
inline void maybe_fail(const DistRun& d, int64_t step, bool saving = false) {
  maybe_fail(d.faults, d.rank(), step, saving);
}

// `braid train`: a plain run (no launcher, one process) trains on self groups; under mpirun/srun
// it creates the World (parallel.init_timeout_s), resolves the mesh, builds the communicators
// and trains on the (dp, tp, pp) mesh. Any error on a rank ends the whole job with
// "braid train: rank N: error: ...". `faults`: what --test-fault asked for (empty otherwise).
void run_train(const RunConfig& cfg, const std::string& config_path, const FaultPoints& faults);

}  // namespace braid
