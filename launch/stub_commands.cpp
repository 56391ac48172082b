// Temporary registrations for subcommands still being written (removed as each lands).
#include "launch/commands.h"
#include "core/error.h"

namespace braid {

namespace {
void stub(CLI::App& app, const char* name, const char* what) {
  auto* c = app.add_subcommand(name, what);
  c->callback([name] { user_error("`braid {}` is not implemented yet", name); });
}
}  // namespace

void add_train_command(CLI::App& app) { stub(app, "train", "Train a model from a YAML config"); }
void add_prepare_command(CLI::App& app) { stub(app, "prepare", "Tokenize text files into shards"); }
void add_eval_command(CLI::App& app) { stub(app, "eval", "Loss of a checkpoint on a token file"); }
void add_generate_command(CLI::App& app) { stub(app, "generate", "Sample from a checkpoint"); }
void add_export_command(CLI::App& app) { stub(app, "export", "Export HF safetensors"); }
void add_import_command(CLI::App& app) { stub(app, "import", "Import HF safetensors"); }

}  // namespace braid
