// run_supervised: a container entrypoint's process loop (it may be PID 1): runs a command,
// reaps every zombie, and turns the pod's SIGTERM into braid's clean stop.
#pragma once

#include <sys/types.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace braid {

struct SupervisorOptions {
  std::vector<std::string> command;  // argv of the child; [0] is looked up on PATH
  // Empty: launcher mode, the first SIGTERM/SIGINT becomes SIGUSR1 to the child (Open MPI's
  // mpirun relays SIGUSR1 to every rank; braid itself treats it like SIGTERM).
  // Else worker mode: the first one becomes SIGTERM to every process of this PID namespace
  // whose name (/proc/PID/comm) is this; the child (sshd) is stopped once they have exited.
  std::string stop_ranks;
  // Worker mode as PID 1: after the named processes have exited, how long to wait for the
  // other processes of the pod (orted, the ssh session) to end before stopping the child.
  double drain_s = 10;
};

// A process of this PID namespace as /proc/PID/stat shows it.
struct ProcEntry {
  pid_t pid = 0;
  std::string comm;  // at most 15 bytes (the kernel's TASK_COMM_LEN - 1)
  char state = '?';  // R, S, D, Z (zombie), ...
};

// Every process /proc lists (this PID namespace, when /proc is its own mount), read from
// /proc/PID/stat; processes that exit while it reads are left out.
std::vector<ProcEntry> list_processes(const std::string& proc_root = "/proc");

// Parses one /proc/PID/stat line ("1234 (braid) S 1 ..."); the name may hold spaces and ')'.
// False for a line that is not of that form.
bool parse_proc_stat(const std::string& line, ProcEntry& out);

// Thrown when the command cannot be started (not found, not executable): a usage error.
class CommandNotStarted : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Runs options.command until it exits and returns its wait status (as waitpid gives it).
// Prints what it does on stderr, each line prefixed "braid supervise: ". Throws
// CommandNotStarted when exec fails, braid::Error when a system call it needs fails.
int run_supervised(const SupervisorOptions& options);

}  // namespace braid
