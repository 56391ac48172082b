// `braid supervise [options] -- CMD ARGS...`: the entrypoint of a launcher or worker pod
// (tools/deploy/mpijob.yaml; docs/multinode.md "Kubernetes").
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "core/error.h"
#include "launch/cli/commands.h"
#include "launch/report/run_metrics.h"
#include "launch/cli/supervisor.h"

namespace braid {

namespace {

// 75 is EX_TEMPFAIL (sysexits.h): "try again later", which is what a stopped run asks for.
constexpr int kDefaultStoppedExitCode = 75;

// The exit status a shell would report for the child: its code, or 128 + the signal.
int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace

void add_supervise_command(CLI::App& app) {
  struct Opts {
    SupervisorOptions sup;
    std::string run_dir;
    int stopped_exit_code = kDefaultStoppedExitCode;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* c = app.add_subcommand(
      "supervise",
      "Run a command as a container's entrypoint (PID 1 safe) and turn SIGTERM into a clean "
      "stop of the braid job");
  c->add_option("--stop-ranks", o->sup.stop_ranks,
                "Worker mode: on SIGTERM, send SIGTERM to every process of this PID namespace "
                "with this name (braid), wait until they have exited (their checkpoint is "
                "written), then stop the command; default: launcher mode, SIGUSR1 to the "
                "command (mpirun relays it to every rank)");
  c->add_option("--drain-s", o->sup.drain_s,
                "Worker mode as PID 1: after those processes have exited, wait up to this many "
                "seconds for the pod's other processes (orted, the ssh session) to end");
  CLI::Option* run = c->add_option("--run", o->run_dir,
                                   "The run directory (run.dir/run.name): when the command exits "
                                   "0 but the run stopped on a signal, exit --stopped-exit-code");
  c->add_option("--stopped-exit-code", o->stopped_exit_code,
                "Exit code for a run that stopped on a signal (with --run), so the job is "
                "retried and continues from its checkpoint")
      ->check(CLI::Range(1, 255))
      ->needs(run);
  c->add_option("command", o->sup.command, "The command and its arguments, after --");
  c->footer(
      "Exits with the command's exit code (128 + N when a signal N killed it). The first "
      "SIGTERM or SIGINT starts the clean stop, a second one sends SIGTERM to the command (and "
      "the named processes) at once; SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 are passed on. Every "
      "exited process is reaped. Usage errors, or a command that cannot be started, exit 2.");
  c->callback([o, c] {
    // CLI11 keeps the "--" it saw among the unparsed arguments; without it a command's own
    // options would be read as supervise's.
    bool dashdash = false;
    for (const std::string& a : c->remaining()) dashdash = dashdash || a == "--";
    if (o->sup.command.empty())
      throw CLI::ValidationError(
          "supervise", "no command given; usage: braid supervise [options] -- CMD ARGS...");
    if (!dashdash)
      throw CLI::ValidationError("supervise",
                                 "put -- before the command: braid supervise "
                                 "[options] -- " +
                                     o->sup.command[0] + " ...");
    const std::string& name = o->sup.stop_ranks;
    if (c->count("--stop-ranks") > 0 &&
        (name.empty() || name.size() > 15 || name.find('/') != std::string::npos))
      throw CLI::ValidationError(
          "--stop-ranks", "'" + name +
                              "' is not a process name: give the program's file "
                              "name as /proc/PID/comm shows it (1 to 15 characters, no '/'), "
                              "e.g. braid");
    int status = 0;
    try {
      status = run_supervised(o->sup);
    } catch (const CommandNotStarted& e) {
      throw CLI::ValidationError("supervise", e.what());
    }
    int code = exit_code_of(status);
    std::fprintf(stderr, "braid supervise: '%s' exited with %s %d\n", o->sup.command[0].c_str(),
                 WIFSIGNALED(status) ? "signal" : "code",
                 WIFSIGNALED(status) ? WTERMSIG(status) : code);
    if (code == 0 && !o->run_dir.empty()) {
      const std::string metrics = (std::filesystem::path(o->run_dir) / "metrics.jsonl").string();
      std::error_code ec;
      if (!std::filesystem::exists(metrics, ec)) {
        // A wrong --run would otherwise pass a stopped run off as finished, never retried.
        std::fprintf(stderr,
                     "braid supervise: error: --run %s has no metrics.jsonl; give the run "
                     "directory the command trains in (run.dir/run.name)\n",
                     o->run_dir.c_str());
        code = 1;
      } else if (stopped_by_signal(read_metrics_jsonl(metrics))) {
        std::fprintf(stderr,
                     "braid supervise: the run stopped on a signal after a checkpoint; exiting "
                     "%d so the job is retried and resumes\n",
                     o->stopped_exit_code);
        code = o->stopped_exit_code;
      }
    }
    // The exit status is the child's, which CLI11's callback cannot return through main().
    std::fflush(stdout);
    std::exit(code);
  });
}

}  // namespace braid
