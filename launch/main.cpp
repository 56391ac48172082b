// The `braid` binary: parses the subcommand and turns errors into messages and exit codes.
#include <cstdio>
#include <exception>

#include "core/error.h"
#include "launch/commands.h"
#include "launch/plan/plan_command.h"
#include "tools/calibrate/calibrate.h"

int main(int argc, char** argv) {
  CLI::App app{"braid: train GPT-2 and Llama style language models", "braid"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "braid 0.1.0");
  braid::add_train_command(app);
  braid::add_prepare_command(app);
  braid::add_eval_command(app);
  braid::add_generate_command(app);
  braid::add_export_command(app);
  braid::add_import_command(app);
  braid::add_merge_lora_command(app);
  braid::add_plan_command(app, braid::plan::calibrate_machine);
  braid::add_report_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const braid::UserError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "internal error: %s\n", e.what());
    return 3;
  }
  return 0;
}
