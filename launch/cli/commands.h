// Each `braid` subcommand lives in its own file and registers itself on the CLI11 app.
#pragma once

#include <CLI/CLI.hpp>

namespace braid {

// Each adds a subcommand with its options and a callback that does the work. Errors are
// thrown (braid::UserError for bad input); main() turns them into a message and exit code.
void add_train_command(CLI::App& app);
void add_prepare_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_generate_command(CLI::App& app);
void add_export_command(CLI::App& app);
void add_import_command(CLI::App& app);
void add_merge_lora_command(CLI::App& app);
// `braid plan` is declared in launch/plan/plan_command.h (it takes the calibrator).
void add_report_command(CLI::App& app);
// `braid supervise -- CMD ...`: a container entrypoint; exits the process with CMD's status.
void add_supervise_command(CLI::App& app);

}  // namespace braid
