// The in-flight table is process-wide on purpose: a signal handler has no other way to reach
// it. Slots are claimed with atomics only, so the handler reads it without locks
// (async-signal-safe: atomics, write(2), signal(2) and raise(3)).
#include "parallel/inflight_report.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstring>

namespace braid::inflight {
namespace {

constexpr int kSlots = 64;
constexpr size_t kLine = 320;
enum : int { kFree = 0, kWriting = 1, kReady = 2 };

struct Slot {
  std::atomic<int> state{kFree};
  char line[kLine];
  size_t len = 0;
};
Slot g_slots[kSlots];
struct sigaction g_old_term, g_old_int;
std::atomic<bool> g_installed{false};

void write_all(const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(STDERR_FILENO, p, n);
    if (w <= 0) return;
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void on_signal(int sig) {
  for (Slot& s : g_slots) {
    if (s.state.load(std::memory_order_acquire) != kReady) continue;
    write_all(s.line, s.len);
  }
  // Hand the signal to whatever was there before (usually: terminate).
  sigaction(sig, sig == SIGTERM ? &g_old_term : &g_old_int, nullptr);
  raise(sig);
}

}  // namespace

int begin(const std::string& line) {
  for (int i = 0; i < kSlots; ++i) {
    int expected = kFree;
    if (!g_slots[i].state.compare_exchange_strong(expected, kWriting)) continue;
    size_t n = std::min(line.size(), kLine - 1);
    std::memcpy(g_slots[i].line, line.data(), n);
    g_slots[i].line[n] = '\n';
    g_slots[i].len = n + 1;
    g_slots[i].state.store(kReady, std::memory_order_release);
    return i;
  }
  return -1;
}

void end(int slot) {
  if (slot >= 0 && slot < kSlots) g_slots[slot].state.store(kFree, std::memory_order_release);
}

std::vector<std::string> recorded() {
  std::vector<std::string> out;
  for (int i = 0; i < kSlots; ++i)
    if (g_slots[i].state.load(std::memory_order_acquire) == kReady)
      out.emplace_back(g_slots[i].line, g_slots[i].len - 1);
  return out;
}

void install_signal_report() {
  if (g_installed.exchange(true)) return;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, &g_old_term);
  sigaction(SIGINT, &sa, &g_old_int);
}

void restore_signal_handlers() {
  if (!g_installed.exchange(false)) return;
  sigaction(SIGTERM, &g_old_term, nullptr);
  sigaction(SIGINT, &g_old_int, nullptr);
}

}  // namespace braid::inflight
