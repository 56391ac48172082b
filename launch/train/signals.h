// StopSignals: SIGTERM, SIGINT and SIGUSR1 turned into a polite "stop after this step" request;
// start_signal_thread: where those signals are handled.
#pragma once

namespace braid {

// Routes the process-directed SIGTERM, SIGINT and SIGUSR1 (kill, Slurm, Kubernetes, mpirun's
// relay, Ctrl-C) to one thread that does nothing else, "braid-signals": the calling thread
// blocks them, so every thread created after it (OpenMP's, MPI's, the data loader's) does too,
// and the kernel delivers them to the one thread that does not. The handlers installed for
// them (StopSignals, the in-flight report, or none: the default action) are unchanged; only the
// thread they run on is. Call first in main(), before any thread exists.
//
// Why: a handler runs on the stack of whichever thread the signal interrupts, below that
// thread's stack pointer, and oneDNN's AVX-512 f32 GEMM kernels (K above 84) run with the stack
// pointer moved into a heap workspace. A signal landing there wrote its frame (3 KB with
// AVX-512 state, 11 KB with AMX tiles) over the heap blocks below the workspace: a rank stopped
// by SIGTERM or SIGUSR1 mid-GEMM aborted later in malloc or free.
//
// Processes forked afterwards (e.g. Open MPI's daemons) start with the mask the process had
// before this call. Idempotent. Returns false (and changes nothing) when the thread could not
// be started.
bool start_signal_thread();

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
