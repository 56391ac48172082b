// Each `braid` subcommand lives in its own file and registers itself on the CLI11 app.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "launch/io/model_io.h"

namespace braid {

// --device and --dtype of the commands that run a trained model (eval, generate).
struct ModelOptions {
  std::string device = "auto";
  std::string dtype = "auto";
};
void add_model_options(CLI::App* c, ModelOptions& o);
// The model at `path` on the device and in the element type the options say (the device named
// on stderr when it is a GPU).
LoadedModel load_model(const std::string& path, const ModelOptions& o, bool apply_adapter);

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
