// Line charts and a stacked bar as inline SVG (no scripts, no external references).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "launch/report/run_metrics.h"

namespace braid {

struct ChartLine {
  std::string label;
  std::string color;  // CSS colour, e.g. "#1f77b4"
  Series points;
};

// A line chart of the given curves with labelled axes and a legend; a placeholder text when
// every curve is empty.
std::string svg_line_chart(const std::string& title, const std::string& y_label,
                           const std::vector<ChartLine>& lines, int width = 640, int height = 260);

// One horizontal bar split into labelled parts proportional to their values.
std::string svg_stacked_bar(const std::vector<std::pair<std::string, double>>& parts,
                            int width = 640);

// "1", "2.5", "0.001", "1.2e+06": short tick labels.
std::string tick_label(double v);
// Round tick positions covering [lo, hi] (about `want` of them, at 1/2/5 x 10^k).
std::vector<double> nice_ticks(double lo, double hi, int want);

// &, <, >, " escaped for HTML text and attributes.
std::string html_escape(const std::string& s);

// A categorical colour; i-th of a fixed palette (wraps around).
const char* palette_color(size_t i);

}  // namespace braid
