// The report page: sections of SVG charts and tables over what metrics.jsonl recorded.
#include "launch/report/report.h"

#include <fmt/format.h>

#include <algorithm>

namespace braid {

namespace {

ChartLine line_of(const RunMetrics& m, const std::string& key, const std::string& label,
                  size_t color) {
  auto it = m.series.find(key);
  return {label, palette_color(color), it == m.series.end() ? Series{} : it->second};
}

std::string section(const std::string& title, const std::string& body) {
  return fmt::format("<section><h2>{}</h2>{}</section>\n", html_escape(title), body);
}

std::string kernel_split(const RunMetrics& m) {
  if (m.kernel_steps <= 0) return "<p class=\"note\">no kernel_s in metrics.jsonl</p>";
  std::vector<std::pair<std::string, double>> parts(m.kernel_seconds.begin(),
                                                    m.kernel_seconds.end());
  std::sort(parts.begin(), parts.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  double total = 0;
  for (const auto& p : parts) total += p.second;
  std::string t = "<table><tr><th>kernel group</th><th>s / step</th><th>share</th></tr>";
  for (const auto& [g, s] : parts)
    t += fmt::format("<tr><td>{}</td><td>{:.5f}</td><td>{:.1f}%</td></tr>", html_escape(g),
                     s / static_cast<double>(m.kernel_steps), total > 0 ? 100.0 * s / total : 0.0);
  t += "</table>";
  return svg_stacked_bar(parts) +
         fmt::format("<p class=\"note\">over {} logged steps</p>", m.kernel_steps) + t;
}

std::string memory_table(const RunMetrics& m) {
  if (m.memory_mib.empty()) return "<p class=\"note\">no memory_mib in metrics.jsonl</p>";
  std::vector<std::pair<std::string, double>> parts;
  for (const auto& [k, v] : m.memory_mib)
    if (k != "cached") parts.emplace_back(k, v);
  std::string t = "<table><tr><th>category</th><th>MiB (live, last window)</th></tr>";
  for (const auto& [k, v] : m.memory_mib)
    t += fmt::format("<tr><td>{}</td><td>{:.2f}</td></tr>", html_escape(k), v);
  return svg_stacked_bar(parts) + t + "</table>";
}

std::string events_list(const RunMetrics& m) {
  std::string s;
  for (const auto& [ev, step] : m.events)
    s += fmt::format("<li>{} at step {}</li>", html_escape(ev), step);
  return s.empty() ? "" : "<ul>" + s + "</ul>";
}

}  // namespace

std::vector<ChartLine> loss_lines(const RunMetrics& m) {
  return {line_of(m, "loss", "train loss", 0), line_of(m, "val_loss", "val loss", 1)};
}

std::string render_report_html(const std::string& run_dir, const RunMetrics& m,
                               const std::string& config_yaml, const std::string& run_json) {
  std::string h = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>braid report: "
      "{}</title>\n"
      "<style>body{{font-family:sans-serif;margin:24px;color:#222;max-width:1340px}}"
      "section{{margin-bottom:28px}}h2{{font-size:17px;border-bottom:1px solid #ddd}}"
      ".grid{{display:flex;flex-wrap:wrap;gap:12px}}table{{border-collapse:collapse;font-size:13px}"
      "}"
      "td,th{{border:1px solid #ddd;padding:3px 8px;text-align:left}}pre{{background:#f6f6f6;"
      "padding:10px;font-size:12px;overflow:auto}}.note{{color:#666;font-size:12px}}</style>\n"
      "</head><body>\n<h1>braid report: {}</h1>\n<p class=\"note\">{} records; last step {}</p>\n",
      html_escape(run_dir), html_escape(run_dir), m.records, m.last_step);
  if (!m.bad_lines.empty())
    h += fmt::format("<p class=\"note\">skipped lines that are not JSON objects: {}</p>",
                     m.bad_lines);
  h += events_list(m);
  h += section("Loss", svg_line_chart("loss", "loss (nats/token)", loss_lines(m), 1300, 340));
  std::string grid = "<div class=\"grid\">";
  grid += svg_line_chart("learning rate", "lr", {line_of(m, "lr", "lr", 2)});
  grid += svg_line_chart("gradient norm (before clipping)", "grad norm",
                         {line_of(m, "grad_norm", "grad norm", 3)});
  grid += svg_line_chart("throughput", "tokens/s", {line_of(m, "tokens_per_s", "tokens/s", 4)});
  grid += svg_line_chart("MFU", "MFU (%)", {line_of(m, "mfu", "MFU %", 5)});
  grid += svg_line_chart("step time", "seconds/step", {line_of(m, "step_s", "s/step", 6)});
  grid += svg_line_chart("memory", "MiB",
                         {line_of(m, "peak_tensor_mib", "peak tensor MiB", 7),
                          line_of(m, "peak_rss_mib", "peak RSS MiB", 8)});
  grid += "</div>";
  h += section("Training curves", grid);
  h += section("Where the time goes (kernel groups)", kernel_split(m));
  h += section("Memory by category", memory_table(m));
  if (!run_json.empty())
    h += section("Run record (run.json)", "<pre>" + html_escape(run_json) + "</pre>");
  h += section("Resolved config (config.yaml)",
               config_yaml.empty() ? "<p class=\"note\">no config.yaml</p>"
                                   : "<pre>" + html_escape(config_yaml) + "</pre>");
  h += "</body></html>\n";
  return h;
}

}  // namespace braid
