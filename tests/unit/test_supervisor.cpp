// braid supervise's pieces: /proc/PID/stat parsing, the process list, the "stopped on a
// signal" test on metrics.jsonl, run_supervised's exit status and exec failure; and SIGUSR1
// being a stop request for braid train, like SIGTERM.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "launch/report/run_metrics.h"
#include "launch/train/signals.h"
#include "launch/cli/supervisor.h"

namespace braid {
namespace {

namespace fs = std::filesystem;

TEST(ProcStat, ParsesPidNameAndState) {
  ProcEntry p;
  ASSERT_TRUE(parse_proc_stat("1234 (braid) S 1 1234 1234 0 -1", p));
  EXPECT_EQ(p.pid, 1234);
  EXPECT_EQ(p.comm, "braid");
  EXPECT_EQ(p.state, 'S');
  // A name may hold spaces and ')': the state follows the last ") ".
  ASSERT_TRUE(parse_proc_stat("77 (a) b c) Z 1 0", p));
  EXPECT_EQ(p.comm, "a) b c");
  EXPECT_EQ(p.state, 'Z');
  for (const char* bad : {"", "x (braid) S 1", "12 braid S", "12 (braid)", "-3 (a) S 1"})
    EXPECT_FALSE(parse_proc_stat(bad, p)) << bad;
}

TEST(ProcStat, ListsNumberedEntriesOnly) {
  const fs::path root = fs::temp_directory_path() / ("braid_proc_" + std::to_string(::getpid()));
  fs::remove_all(root);
  for (const char* d : {"12", "13", "self", "99"}) fs::create_directories(root / d);
  std::ofstream(root / "12" / "stat") << "12 (braid) R 1 0\n";
  std::ofstream(root / "13" / "stat") << "13 (orted) Z 1 0\n";
  std::ofstream(root / "self" / "stat") << "5 (self) R 1 0\n";  // not a PID entry
  // 99 has no stat: it exited while the list was read.
  std::vector<ProcEntry> got = list_processes(root.string());
  std::sort(got.begin(), got.end(), [](auto& a, auto& b) { return a.pid < b.pid; });
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].comm, "braid");
  EXPECT_EQ(got[1].state, 'Z');
  fs::remove_all(root);
  // The real /proc lists this process.
  bool self = false;
  for (const ProcEntry& p : list_processes()) self = self || p.pid == ::getpid();
  EXPECT_TRUE(self);
}

RunMetrics events(std::initializer_list<const char*> names) {
  RunMetrics m;
  for (const char* n : names) m.events.emplace_back(n, 0);
  return m;
}

TEST(RunMetrics, StoppedBySignalMeansStopAfterTheLastStart) {
  EXPECT_TRUE(stopped_by_signal(events({"start", "checkpoint", "stop", "end"})));
  EXPECT_FALSE(stopped_by_signal(events({"start", "checkpoint", "end"})));
  EXPECT_FALSE(stopped_by_signal(events({"start", "stop", "end", "resume", "end"})));
  EXPECT_TRUE(stopped_by_signal(events({"start", "stop", "resume", "stop", "end"})));
  EXPECT_FALSE(stopped_by_signal(events({})));
}

TEST(RunMetrics, StoppedBySignalFromAFile) {
  const fs::path f = fs::temp_directory_path() / ("braid_stop_" + std::to_string(::getpid()));
  std::ofstream(f) << R"({"event":"start","step":0})"
                      "\n"
                   << R"({"event":"train","step":1,"loss":5.0})"
                      "\n"
                   << R"({"event":"stop","step":1,"signal":"SIGUSR1"})"
                      "\n"
                   << R"({"event":"end","step":1})"
                      "\n";
  EXPECT_TRUE(stopped_by_signal(read_metrics_jsonl(f.string())));
  std::ofstream(f, std::ios::app) << R"({"event":"resume","step":1})"
                                     "\n"
                                  << R"({"event":"end","step":4})"
                                     "\n";
  EXPECT_FALSE(stopped_by_signal(read_metrics_jsonl(f.string())));
  fs::remove(f);
}

TEST(StopSignals, Sigusr1IsAStopRequestThatNeverForcesAnExit) {
  {
    const StopSignals stop;
    EXPECT_EQ(stop.requested(), 0);
    ::raise(SIGUSR1);  // the process survives: the handler only records it
    EXPECT_EQ(stop.requested(), SIGUSR1);
    // A SIGTERM after it (the rank's own pod evicted too) is not a "second signal": it would
    // exit at once, and this test process with it.
    ::raise(SIGTERM);
    ::raise(SIGUSR1);
    EXPECT_EQ(stop.requested(), SIGUSR1);
  }
  EXPECT_STREQ(StopSignals::name(SIGUSR1), "SIGUSR1");
  EXPECT_STREQ(StopSignals::name(SIGTERM), "SIGTERM");
  EXPECT_STREQ(StopSignals::name(SIGINT), "SIGINT");
  // Uninstalled again: SIGUSR1 has its default action (terminate) back.
  struct sigaction now {};
  ::sigaction(SIGUSR1, nullptr, &now);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
}

TEST(Supervisor, ReturnsTheChildsWaitStatus) {
  SupervisorOptions o;
  o.command = {"sh", "-c", "exit 7"};
  int st = run_supervised(o);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 7);
  o.command = {"sh", "-c", "kill -KILL $$"};
  st = run_supervised(o);
  ASSERT_TRUE(WIFSIGNALED(st));
  EXPECT_EQ(WTERMSIG(st), SIGKILL);
}

TEST(Supervisor, CommandThatCannotStartThrows) {
  SupervisorOptions o;
  o.command = {"/nonexistent/braid-no-such-program"};
  try {
    run_supervised(o);
    FAIL() << "no exception";
  } catch (const CommandNotStarted& e) {
    EXPECT_NE(std::string(e.what()).find("No such file or directory"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace braid
