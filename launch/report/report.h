// `braid report`: a run directory rendered as one self-contained HTML page (and a loss PNG).
#pragma once

#include <string>
#include <vector>

#include "launch/report/run_metrics.h"
#include "launch/report/svg_chart.h"

namespace braid {

// The training-loss and validation-loss curves (shared by the HTML and the PNG).
std::vector<ChartLine> loss_lines(const RunMetrics& m);

// The page: curves of loss and val loss, lr, grad norm, tokens/s, MFU, step time, memory; the
// kernel-group time split; memory by category; run.json; the resolved config. Everything is
// inline (SVG, CSS); nothing is fetched.
std::string render_report_html(const std::string& run_dir, const RunMetrics& m,
                               const std::string& config_yaml, const std::string& run_json);

}  // namespace braid
