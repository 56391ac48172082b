// `braid plan`: registers the subcommand on the CLI11 app.
#pragma once

#include <CLI/CLI.hpp>

#include "launch/plan/calibrate_options.h"

namespace braid {

// `calibrate` runs --calibrate (main() passes launch/calibrate's calibrate_machine); without one,
// --calibrate is refused with a message, so the planner itself runs no kernels.
void add_plan_command(CLI::App& app, plan::Calibrator calibrate = {});

}  // namespace braid
