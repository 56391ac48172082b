// FaultPoints: the failures a test makes `braid train` inject at chosen steps. Made only from
// the hidden, test-named `--test-fault` flag of `braid train` (train_command.cpp) and passed down
// to where each fault happens; every other run holds an empty one. Nothing else can set them:
// no environment variable, config key or --set, so an inherited shell or job environment
// cannot trip them in a production run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace braid {

struct FaultPoints {
  // fail_at_step=RANK:STEP[:MODE]: world rank RANK (0 in one process) fails at the start of
  // (1-based) step STEP: `throw` (an error), `kill` (SIGKILL), `hang` (never joins the next
  // collective), or `kill_at_save` (SIGKILL when that step's checkpoint starts). fail_rank < 0:
  // no such fault.
  int fail_rank = -1;
  int64_t fail_step = 0;
  std::string fail_mode = "throw";
  // overflow_at_step=STEP[:DP_RANK] (bf16/fp16 runs): after step STEP's backward one gradient
  // is set to inf, as an fp16 overflow would leave it; with ZeRO-1 only in DP rank DP_RANK's
  // gradient shard (default 0), as a reduce-scatter would leave it. overflow_step < 0: none.
  int64_t overflow_step = -1;
  int overflow_dp_rank = 0;
  // The flag's values as given, for the warning the run prints.
  std::vector<std::string> specs;

  bool empty() const { return fail_rank < 0 && overflow_step < 0; }
};

// Parses --test-fault values ("fail_at_step=1:3:kill", "overflow_at_step=8:1"); a malformed or
// unknown one is a UserError naming the flag, the value and the forms it takes.
FaultPoints parse_test_faults(const std::vector<std::string>& specs);

// The fail_at_step fault, when it is this `rank`'s at `step` (1-based): at the start of the
// step, or with `saving` at the start of its checkpoint (kill_at_save).
void maybe_fail(const FaultPoints& f, int rank, int64_t step, bool saving = false);

}  // namespace braid
