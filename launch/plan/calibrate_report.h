// The text `braid plan --calibrate` prints: the measured rates and how long it took.
#pragma once

#include <string>

#include "launch/plan/calibrate_options.h"

namespace braid::plan {

std::string calibration_text(const CalibrationRun& run, const CalibrateOptions& opt,
                             const std::string& out_path);

}  // namespace braid::plan
