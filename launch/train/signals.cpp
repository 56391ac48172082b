// StopSignals: sigaction handlers (SIGTERM, SIGINT, SIGUSR1) that set a flag on the first signal
// and _exit on the second. start_signal_thread: the one thread they run on.
#include "launch/train/signals.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>

#include "core/error.h"

namespace braid {

namespace {

// The handler's only way to talk to the trainer. Lock-free atomics are async-signal-safe.
std::atomic<int> g_first_signal{0};
// SIGTERMs and SIGINTs received: the second of those exits at once. SIGUSR1 is not counted, so
// a rank that gets both a SIGUSR1 relayed by mpirun (the launcher pod's eviction) and a SIGTERM
// (its own pod's eviction, which often comes at the same moment) still stops cleanly.
std::atomic<int> g_forcing_signals{0};
std::atomic<bool> g_installed{false};
struct sigaction g_old_term, g_old_int, g_old_usr1;

void write_stderr(const char* s) {
  [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, s, std::strlen(s));
}

void on_stop_signal(int signo) {
  if (signo != SIGUSR1 && g_forcing_signals.fetch_add(1) >= 1) {
    write_stderr("braid: second signal: exiting now; the last complete checkpoint is kept\n");
    ::_exit(128 + signo);
  }
  int expected = 0;
  if (!g_first_signal.compare_exchange_strong(expected, signo)) return;  // already stopping
  // One string per signal: the handler may only call async-signal-safe functions (write).
  write_stderr(signo == SIGINT    ? "\nbraid: SIGINT received: finishing this step, then writing a "
                                    "checkpoint (send it again to exit at once)\n"
               : signo == SIGUSR1 ? "\nbraid: SIGUSR1 received: finishing this step, then writing "
                                    "a checkpoint (SIGTERM twice to exit at once)\n"
                                  : "\nbraid: SIGTERM received: finishing this step, then writing "
                                    "a checkpoint (send it again to exit at once)\n");
}

// What start_signal_thread routes.
sigset_t routed_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGUSR1);
  return set;
}
std::mutex g_route_mu;
bool g_routed = false;
sigset_t g_original_mask;  // the calling thread's mask before routing

// In the child of a fork: the mask the process had before routing, so that what it execs
// (Open MPI's daemons, say) answers SIGTERM as any program does.
void restore_mask_in_child() { pthread_sigmask(SIG_SETMASK, &g_original_mask, nullptr); }

}  // namespace

bool start_signal_thread() {
  std::lock_guard<std::mutex> lock(g_route_mu);
  if (g_routed) return true;
  const sigset_t set = routed_signals();
  sigset_t before;
  if (pthread_sigmask(SIG_BLOCK, &set, &before) != 0) return false;
  g_original_mask = before;
  try {
    std::thread([set] {
      pthread_setname_np(pthread_self(), "braid-signals");
      pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
      for (;;) ::pause();  // each handler runs here, then pause() returns
    }).detach();
  } catch (const std::system_error&) {
    pthread_sigmask(SIG_SETMASK, &before, nullptr);  // no thread: handle them where they land
    return false;
  }
  pthread_atfork(nullptr, nullptr, restore_mask_in_child);  // once: g_routed guards
  g_routed = true;
  return true;
}

StopSignals::StopSignals() {
  BRAID_CHECK(!g_installed.exchange(true), "StopSignals is already installed");
  g_first_signal.store(0);
  g_forcing_signals.store(0);
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // reads and writes in progress carry on instead of failing EINTR
  BRAID_CHECK(sigaction(SIGTERM, &sa, &g_old_term) == 0, "sigaction(SIGTERM): {}",
              std::strerror(errno));
  BRAID_CHECK(sigaction(SIGINT, &sa, &g_old_int) == 0, "sigaction(SIGINT): {}",
              std::strerror(errno));
  BRAID_CHECK(sigaction(SIGUSR1, &sa, &g_old_usr1) == 0, "sigaction(SIGUSR1): {}",
              std::strerror(errno));
}

StopSignals::~StopSignals() {
  sigaction(SIGTERM, &g_old_term, nullptr);
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGUSR1, &g_old_usr1, nullptr);
  g_installed.store(false);
}

int StopSignals::requested() const { return g_first_signal.load(); }

const char* StopSignals::name(int signo) {
  if (signo == SIGTERM) return "SIGTERM";
  if (signo == SIGINT) return "SIGINT";
  if (signo == SIGUSR1) return "SIGUSR1";
  return "signal";
}

}  // namespace braid
