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

void add_prepare_command(CLI::App& app) { stub(app, "prepare", "Tokenize text files into shards"); }
void add_plan_command(CLI::App& app) { stub(app, "plan", "Plan memory, time and layout"); }

}  // namespace braid
