// StopSignals: SIGTERM and SIGINT turned into a polite "stop after this step" request.
#pragma once

namespace braid {

// While alive, SIGTERM and SIGINT (Slurm time limits, Kubernetes evictions, preemptible cloud
// instances, Ctrl-C) no longer kill the process: the first one is recorded for the trainer to
// see between steps (it finishes the step, writes a checkpoint and returns normally); a second
// one exits at once with 128 + signal. An exit in the middle of a checkpoint save damages
// nothing: saves go to a temporary directory that is renamed into place only when complete.
// The previous handlers are restored on destruction. One instance at a time (a signal handler
// has no other way to reach its owner than process-wide state, which this class keeps private).
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // 0 while no stop was requested, else the number of the first signal received.
  int requested() const;
  // "SIGTERM", "SIGINT" or "signal".
  static const char* name(int signo);
};

}  // namespace braid
