// SVG charts: axes from nice_ticks, one polyline per curve, a legend, all coordinates in pixels.
#include "launch/report/svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace braid {

namespace {

constexpr const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  void add(double v) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return !(lo <= hi); }
  // A flat range is widened so it still maps to a height.
  void widen() {
    if (hi - lo <= std::abs(hi) * 1e-9 || hi == lo) {
      const double d = hi == 0 ? 1.0 : std::abs(hi) * 0.05;
      lo -= d;
      hi += d;
    }
  }
};

}  // namespace

const char* palette_color(size_t i) {
  return kPalette[i % (sizeof(kPalette) / sizeof(kPalette[0]))];
}

std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string tick_label(double v) {
  if (v == 0) return "0";
  std::string s = fmt::format("{:.4g}", v);
  return s;
}

std::vector<double> nice_ticks(double lo, double hi, int want) {
  std::vector<double> out;
  if (!(hi > lo) || !std::isfinite(lo) || !std::isfinite(hi) || want < 1) return out;
  const double raw = (hi - lo) / want;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  // Multiples of the step (not repeated additions), so 0.6 is 3 x 0.2 and not 0.6000000000000001.
  for (double k = std::ceil(lo / step - 1e-9); k * step <= hi + step * 1e-9; k += 1)
    out.push_back(k == 0 ? 0.0 : k * step);
  return out;
}

std::string svg_line_chart(const std::string& title, const std::string& y_label,
                           const std::vector<ChartLine>& lines, int width, int height) {
  const int left = 70, right = 16, top = 28, bottom = 40;
  const int pw = width - left - right, ph = height - top - bottom;
  Range xr, yr;
  for (const ChartLine& l : lines)
    for (const auto& [x, y] : l.points) {
      xr.add(x);
      yr.add(y);
    }
  std::string s = fmt::format(
      "<svg class=\"chart\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" role=\"img\">"
      "<title>{}</title><rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>"
      "<text x=\"{}\" y=\"18\" font-size=\"14\" font-weight=\"bold\">{}</text>",
      width, height, width, height, html_escape(title), left, html_escape(title));
  if (xr.empty()) {
    s += fmt::format(
        "<text x=\"{}\" y=\"{}\" font-size=\"12\" fill=\"#888\">no data recorded</text></svg>",
        left, top + ph / 2);
    return s;
  }
  xr.widen();
  yr.widen();
  auto px = [&](double x) { return left + (x - xr.lo) / (xr.hi - xr.lo) * pw; };
  auto py = [&](double y) { return top + ph - (y - yr.lo) / (yr.hi - yr.lo) * ph; };
  s += fmt::format("<g font-size=\"11\" fill=\"#444\" stroke-width=\"1\">");
  for (double t : nice_ticks(yr.lo, yr.hi, 5)) {
    s += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e5e5e5\"/>",
                     left, left + pw, py(t), py(t));
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>", left - 6,
                     py(t) + 4, tick_label(t));
  }
  for (double t : nice_ticks(xr.lo, xr.hi, 6)) {
    s += fmt::format("<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{}\" y2=\"{}\" stroke=\"#e5e5e5\"/>",
                     px(t), px(t), top, top + ph);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>", px(t),
                     top + ph + 16, tick_label(t));
  }
  s += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#999\"/>", left,
      top, pw, ph);
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">step</text>", left + pw / 2,
                   top + ph + 32);
  s += fmt::format(
      "<text transform=\"translate(14 {}) rotate(-90)\" text-anchor=\"middle\">{}</text></g>",
      top + ph / 2, html_escape(y_label));
  int legend_y = top + 14;
  for (const ChartLine& l : lines) {
    if (l.points.empty()) continue;
    std::string pts;
    for (const auto& [x, y] : l.points) pts += fmt::format("{:.1f},{:.1f} ", px(x), py(y));
    s += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.8\" points=\"{}\"/>",
                     l.color, pts);
    if (l.points.size() == 1)  // a lone point draws no line
      s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>",
                       px(l.points[0].first), py(l.points[0].second), l.color);
    s += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"3\" fill=\"{}\"/>"
        "<text x=\"{}\" y=\"{}\" font-size=\"11\">{}</text>",
        left + pw - 120, legend_y - 4, l.color, left + pw - 104, legend_y, html_escape(l.label));
    legend_y += 15;
  }
  s += "</svg>";
  return s;
}

std::string svg_stacked_bar(const std::vector<std::pair<std::string, double>>& parts, int width) {
  double total = 0;
  for (const auto& p : parts) total += std::max(0.0, p.second);
  const int height = 64, bar_h = 26;
  std::string s =
      fmt::format("<svg class=\"bar\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\">", width,
                  height, width, height);
  if (total <= 0)
    return s +
           "<text x=\"0\" y=\"20\" font-size=\"12\" fill=\"#888\">no kernel times "
           "recorded</text></svg>";
  double x = 0;
  size_t i = 0;
  for (const auto& [name, v] : parts) {
    const double w = std::max(0.0, v) / total * width;
    const char* color = palette_color(i++);
    s += fmt::format(
        "<rect x=\"{:.1f}\" y=\"0\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"><title>{}: "
        "{:.1f}%</title></rect>",
        x, w, bar_h, color, html_escape(name), 100.0 * v / total);
    if (w > 60)
      s += fmt::format(
          "<text x=\"{:.1f}\" y=\"{}\" font-size=\"11\" fill=\"#fff\">{} {:.0f}%</text>", x + 4,
          bar_h - 9, html_escape(name), 100.0 * v / total);
    x += w;
  }
  return s + "</svg>";
}

}  // namespace braid
