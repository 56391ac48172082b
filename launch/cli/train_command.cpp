// `braid train CONFIG [--set section.key=value ...]`
#include <cstdio>
#include <memory>

#include "launch/cli/commands.h"
#include "launch/config/config.h"
#include "launch/train/dist_run.h"
#include "launch/train/dry_run.h"
#include "launch/config/train_config.h"

namespace braid {

void add_train_command(CLI::App& app) {
  struct Opts {
    std::string config;
    std::vector<std::string> overrides;
    bool dry_run = false;
    std::vector<std::string> test_faults;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* c = app.add_subcommand("train", "Train a model from a YAML config file");
  c->add_option("config", o->config, "YAML config file (see docs/config.md)")->required();
  c->add_option("--set", o->overrides,
                "Override a config key, e.g. --set optim.lr=1e-3 (repeatable)");
  c->add_flag("--dry-run", o->dry_run,
              "Print this rank's memory plan (planner formulas) next to what one real step "
              "measured, then exit without writing a run directory");
  // Fault injection for the failure and precision tests (launch/train/fault_points.h). Hidden from
  // --help (empty group) and named for tests: the one way to make a run fail on purpose.
  c->add_option("--test-fault", o->test_faults,
                "Inject a fault (tests only): fail_at_step=RANK:STEP[:MODE], "
                "overflow_at_step=STEP[:DP_RANK]")
      ->group("");
  c->footer(
      "The run directory <run.dir>/<run.name> receives config.yaml (resolved), run.json "
      "(version, commit, machine), metrics.jsonl, TensorBoard events, tokenizer.json and "
      "checkpoints/. checkpoint.resume=auto continues from its latest checkpoint. SIGTERM or "
      "SIGINT finishes the step, writes a checkpoint and exits 0; a second one exits at "
      "once. One `braid train` per run directory (a lock refuses a second). Under mpirun -np N "
      "it trains data-parallel over N ranks (parallel: section, docs/multinode.md).");
  c->callback([o] {
    const FaultPoints faults = parse_test_faults(o->test_faults);
    RunConfig cfg = load_run_config(o->config, o->overrides);
    if (o->dry_run) {
      dry_run(cfg);
      return;
    }
    if (!faults.empty()) {
      std::string list;
      for (const std::string& s : faults.specs) list += " " + s;
      std::fprintf(stderr, "braid train: injecting test faults (--test-fault):%s\n", list.c_str());
    }
    run_train(cfg, o->config, faults);
  });
}

}  // namespace braid
