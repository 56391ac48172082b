// DistRun: this rank's place in `braid train` (its ParallelDims: the mesh and every group, self
// groups for one process) and the faults a test asked it to inject (launch/train/fault_points.h).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "launch/train/exec_setup.h"
#include "launch/train/fault_points.h"
#include "parallel/parallel_dims.h"

namespace braid {

struct RunConfig;

struct DistRun {
  ParallelDims dims = ParallelDims::single();
  FaultPoints faults;  // empty unless `--test-fault` was given
  // Set by run_train when it placed this rank before building its groups (several ranks): the
  // device and why, and, on a GPU, the context whose stream the NCCL groups order their work
  // after. Unset: the trainer chooses (one process).
  std::optional<DeviceDecision> device;
  std::shared_ptr<ExecContext> ctx;

  int rank() const { return dims.rank(); }
};

// The fail_at_step fault for `step` (1-based) on this rank, if it is the one; `saving`: at the
// start of the step's checkpoint rather than of the step.
inline void maybe_fail(const DistRun& d, int64_t step, bool saving = false) {
  maybe_fail(d.faults, d.rank(), step, saving);
}

// `braid train`: a plain run (no launcher, one process) trains on self groups; under mpirun/srun
// it creates the World (parallel.init_timeout_s), resolves the mesh, builds the communicators
// (MPI groups; on GPUs a NCCL group over each, host scalars still over MPI: parallel.backend),
// places each rank on its GPU and trains on the (dp, tp, pp) mesh. Any error on a rank ends the
// whole job with "braid train: rank N: error: ...". `faults`: what --test-fault asked for (empty
// otherwise).
void run_train(const RunConfig& cfg, const std::string& config_path, const FaultPoints& faults);

}  // namespace braid
