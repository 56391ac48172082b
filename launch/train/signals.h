// StopSignals: SIGTERM, SIGINT and SIGUSR1 turned into a polite "stop after this step" request.
#pragma once

namespace braid {

// While alive, SIGTERM and SIGINT (Slurm time limits, Kubernetes evictions, preemptible cloud
// instances, Ctrl-C) and SIGUSR1 no longer kill the process: the first one is recorded for the
// trainer to see between steps (it finishes the step, writes a checkpoint and returns
// normally); a second SIGTERM or SIGINT exits at once with 128 + signal. SIGUSR1 is there for
// mpirun: Open MPI's mpirun answers its own SIGTERM by killing the job within a second, but
// relays a SIGUSR1 it receives to every rank, so `kill -USR1 <mpirun>` (what `braid supervise`
// sends) stops a whole job cleanly from the launcher's side. SIGUSR1 never forces an exit and
// does not count towards the second signal: a rank evicted together with the launcher gets
// both a SIGTERM and the relayed SIGUSR1, and must still write its checkpoint. An exit in the
// middle of a checkpoint save damages nothing: saves go to a temporary directory that is
// renamed into place only when complete. The previous handlers are restored on destruction.
// One instance at a time (a signal handler has no other way to reach its owner than
// process-wide state, which this class keeps private).
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // 0 while no stop was requested, else the number of the first signal received.
  int requested() const;
  // "SIGTERM", "SIGINT", "SIGUSR1" or "signal".
  static const char* name(int signo);
};

}  // namespace braid
