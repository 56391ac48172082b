// run_supervised: fork/exec the command, then one loop over sigtimedwait that reaps, relays
// signals and walks the stop sequence. Signals are blocked and taken synchronously, so nothing
// runs in a signal handler and there is no race between a signal and the loop's checks.
#include "launch/cli/supervisor.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "core/error.h"

namespace braid {

namespace {

using Clock = std::chrono::steady_clock;

// Stop requests, signals passed on unchanged, and the child's exits.
constexpr int kStopSignals[] = {SIGTERM, SIGINT};
constexpr int kRelayed[] = {SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

template <typename... Args>
void say(fmt::format_string<Args...> f, Args&&... args) {
  std::fprintf(stderr, "braid supervise: %s\n",
               fmt::format(f, std::forward<Args>(args)...).c_str());
  std::fflush(stderr);
}

// A process that is PID 1 of its namespace receives only the signals it has a handler for;
// blocked signals are always queued, and this handler (never run while they stay blocked)
// makes sure of it should anything unblock them.
void on_signal(int) {}

sigset_t supervised_set() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : kStopSignals) sigaddset(&set, s);
  for (int s : kRelayed) sigaddset(&set, s);
  sigaddset(&set, SIGCHLD);
  return set;
}

// The processes named `name`, alive (not zombies), other than this process.
std::vector<pid_t> live_named(const std::string& name) {
  std::vector<pid_t> out;
  for (const ProcEntry& p : list_processes())
    if (p.comm == name && p.state != 'Z' && p.pid != ::getpid()) out.push_back(p.pid);
  return out;
}

// Live processes other than this one and the child: in a pod, what is left of the job (orted,
// the ssh session) once the ranks are gone.
size_t live_others(pid_t child) {
  size_t n = 0;
  for (const ProcEntry& p : list_processes())
    if (p.state != 'Z' && p.pid != ::getpid() && p.pid != child) ++n;
  return n;
}

void signal_all(const std::vector<pid_t>& pids, int sig) {
  for (pid_t p : pids) ::kill(p, sig);  // ESRCH: it exited meanwhile, which is the goal
}

std::string pid_list(const std::vector<pid_t>& pids) {
  std::string s;
  for (pid_t p : pids) {
    if (!s.empty()) s += ' ';
    s += std::to_string(p);
  }
  return s;
}

// fork + exec with the signal mask and dispositions a fresh process has; exec failure is
// reported through a close-on-exec pipe, so "not found" is told apart from a child that ran
// and exited 127.
pid_t spawn(const std::vector<std::string>& command, const sigset_t& old_mask) {
  int fds[2];
  BRAID_CHECK(::pipe2(fds, O_CLOEXEC) == 0, "pipe2: {}", std::strerror(errno));
  std::vector<char*> argv;
  for (const std::string& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  BRAID_CHECK(pid >= 0, "fork: {}", std::strerror(errno));
  if (pid == 0) {
    ::close(fds[0]);
    // Its own process group: a terminal's Ctrl-C (or a kill of the supervisor's group)
    // reaches only the supervisor, which decides what the child gets.
    ::setpgid(0, 0);
    // Should the supervisor be killed outright (not PID 1), the job does not run on unwatched.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(128 + SIGTERM);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int s : kStopSignals) ::sigaction(s, &dfl, nullptr);
    for (int s : kRelayed) ::sigaction(s, &dfl, nullptr);
    ::sigaction(SIGCHLD, &dfl, nullptr);
    ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    ::execvp(argv[0], argv.data());
    const int err = errno;
    [[maybe_unused]] const ssize_t n = ::write(fds[1], &err, sizeof err);
    ::_exit(127);
  }
  ::close(fds[1]);
  int err = 0;
  ssize_t got;
  do got = ::read(fds[0], &err, sizeof err);
  while (got < 0 && errno == EINTR);
  ::close(fds[0]);
  if (got == static_cast<ssize_t>(sizeof err)) {
    int status;
    ::waitpid(pid, &status, 0);
    throw CommandNotStarted(
        fmt::format("cannot run '{}': {}{}", command[0], std::strerror(err),
                    command[0].find('/') == std::string::npos ? " (looked up on PATH)" : ""));
  }
  return pid;
}

}  // namespace

bool parse_proc_stat(const std::string& line, ProcEntry& out) {
  const size_t open = line.find(" (");
  const size_t close = line.rfind(") ");
  if (open == std::string::npos || close == std::string::npos || close < open + 2 ||
      close + 2 >= line.size())
    return false;
  try {
    size_t used = 0;
    const long pid = std::stol(line.substr(0, open), &used);
    if (used != open || pid <= 0) return false;
    out.pid = static_cast<pid_t>(pid);
  } catch (const std::exception&) {
    return false;
  }
  out.comm = line.substr(open + 2, close - open - 2);
  out.state = line[close + 2];
  return true;
}

std::vector<ProcEntry> list_processes(const std::string& proc_root) {
  std::vector<ProcEntry> out;
  DIR* dir = ::opendir(proc_root.c_str());
  BRAID_CHECK(dir != nullptr, "cannot list {}: {}", proc_root, std::strerror(errno));
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;  // only the numbered entries
    std::ifstream f(proc_root + "/" + e->d_name + "/stat");
    std::string line;
    ProcEntry p;
    if (f && std::getline(f, line) && parse_proc_stat(line, p)) out.push_back(p);
  }
  ::closedir(dir);
  return out;
}

int run_supervised(const SupervisorOptions& o) {
  BRAID_CHECK(!o.command.empty(), "no command");
  const sigset_t set = supervised_set();
  sigset_t old_mask;
  BRAID_CHECK(::sigprocmask(SIG_BLOCK, &set, &old_mask) == 0, "sigprocmask: {}",
              std::strerror(errno));
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  std::vector<std::pair<int, struct sigaction>> old_actions;
  for (int s = 1; s < NSIG; ++s) {
    if (!sigismember(&set, s)) continue;
    old_actions.push_back({s, {}});
    ::sigaction(s, &sa, &old_actions.back().second);
  }

  // Not PID 1 (docker run without --init, a shell): orphans of the job are still reaped here.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  const pid_t child = spawn(o.command, old_mask);
  const bool worker = !o.stop_ranks.empty();
  say("started '{}' (pid {}){}", o.command[0], child,
      worker ? fmt::format("; on SIGTERM: stop the '{}' processes, then it", o.stop_ranks)
             : "; on SIGTERM: SIGUSR1 to it (mpirun relays SIGUSR1 to every rank)");

  // Worker mode's stop sequence: ranks stopping -> draining the rest -> child stopped.
  enum class Phase { kRunning, kRanks, kDrain, kChild } phase = Phase::kRunning;
  int stop_requests = 0;
  std::set<pid_t> signalled;  // worker mode: the named processes sent their one SIGTERM
  Clock::time_point drain_until{};
  std::optional<int> child_status;
  while (!child_status) {
    // Poll /proc ten times a second while the stop sequence waits on other processes.
    const bool polling = phase == Phase::kRanks || phase == Phase::kDrain;
    const timespec wait = polling ? timespec{0, 100'000'000} : timespec{1, 0};
    siginfo_t info;
    const int sig = ::sigtimedwait(&set, &info, &wait);
    if (sig < 0 && errno != EAGAIN && errno != EINTR)
      BRAID_CHECK(false, "sigtimedwait: {}", std::strerror(errno));

    // Reap everything: as PID 1 every orphan of the namespace is this process's child.
    for (;;) {
      int status;
      const pid_t p = ::waitpid(-1, &status, WNOHANG);
      if (p <= 0) break;
      if (p == child) child_status = status;
    }
    if (child_status) break;

    if (sig == SIGTERM || sig == SIGINT) {
      ++stop_requests;
      const char* name = sig == SIGTERM ? "SIGTERM" : "SIGINT";
      if (stop_requests == 1 && !worker) {
        say("{}: asking for a clean stop (SIGUSR1 to pid {}); send it again to stop at once", name,
            child);
        ::kill(child, SIGUSR1);
      } else if (stop_requests == 1) {
        const std::vector<pid_t> ranks = live_named(o.stop_ranks);
        say("{}: SIGTERM to the '{}' processes ({}); the child stops once they have exited; "
            "send it again to stop at once",
            name, o.stop_ranks, ranks.empty() ? "none running" : pid_list(ranks));
        signal_all(ranks, SIGTERM);
        signalled.insert(ranks.begin(), ranks.end());
        phase = Phase::kRanks;
      } else {
        say("{} again: SIGTERM to pid {}{} now", name, child,
            worker ? fmt::format(" and the '{}' processes", o.stop_ranks) : "");
        if (worker) signal_all(live_named(o.stop_ranks), SIGTERM);
        ::kill(child, SIGTERM);
        phase = Phase::kChild;
      }
    } else if (sig > 0 && sig != SIGCHLD) {
      ::kill(child, sig);  // SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2: passed on as they came
    }

    if (phase == Phase::kRanks) {
      // A rank that started after the SIGTERM (the job was still starting up) gets one too,
      // once: a second SIGTERM would make a braid rank exit without its checkpoint.
      std::vector<pid_t> late;
      for (pid_t p : live_named(o.stop_ranks))
        if (signalled.insert(p).second) late.push_back(p);
      if (!late.empty()) {
        say("SIGTERM to the '{}' processes started since ({})", o.stop_ranks, pid_list(late));
        signal_all(late, SIGTERM);
      }
    }
    if (phase == Phase::kRanks && live_named(o.stop_ranks).empty()) {
      // Only as PID 1 is /proc this pod's alone; elsewhere the rest would be the whole machine.
      const bool drain = ::getpid() == 1 && o.drain_s > 0;
      say("the '{}' processes have exited{}", o.stop_ranks,
          drain ? fmt::format("; waiting up to {} s for the rest of the job to end", o.drain_s)
                : "");
      phase = drain ? Phase::kDrain : Phase::kChild;
      if (!drain) {
        say("SIGTERM to pid {}", child);
        ::kill(child, SIGTERM);
      }
      drain_until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(o.drain_s));
    }
    if (phase == Phase::kDrain) {
      const size_t others = live_others(child);
      if (others == 0 || Clock::now() >= drain_until) {
        say("SIGTERM to pid {}{}", child,
            others == 0 ? "" : fmt::format(" ({} other processes still running)", others));
        ::kill(child, SIGTERM);
        phase = Phase::kChild;
      }
    }
  }
  for (const auto& [s, act] : old_actions) ::sigaction(s, &act, nullptr);
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  return *child_status;
}

}  // namespace braid
