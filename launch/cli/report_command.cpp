// `braid report RUN_DIR [--out FILE] [--png]`: the run as a self-contained HTML page.
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "launch/cli/commands.h"
#include "launch/report/png.h"
#include "launch/report/report.h"

namespace braid {

namespace fs = std::filesystem;

namespace {

std::string read_optional(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return "";
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

void add_report_command(CLI::App& app) {
  struct Opts {
    std::string run_dir, out;
    bool png = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* c =
      app.add_subcommand("report", "Render a run directory as one self-contained HTML page");
  c->add_option("run_dir", o->run_dir, "A run directory written by `braid train`")->required();
  c->add_option("--out", o->out, "Where to write the page (default: RUN_DIR/report.html)");
  c->add_flag("--png", o->png, "Also write the loss plot as a PNG beside the page (loss.png)");
  c->footer(
      "The page holds loss and validation-loss curves, learning rate, gradient norm, "
      "tokens/s, MFU, step time and memory over steps, the kernel-group time split, memory "
      "by category, run.json and the resolved config; it fetches nothing.");
  c->callback([o] {
    const fs::path run(o->run_dir);
    std::error_code ec;
    BRAID_USER_CHECK(fs::is_directory(run, ec),
                     "{} is not a directory; give a run directory "
                     "written by `braid train`",
                     o->run_dir);
    const RunMetrics m = read_metrics_jsonl((run / "metrics.jsonl").string());
    const fs::path out = o->out.empty() ? run / "report.html" : fs::path(o->out);
    BRAID_USER_CHECK(!fs::is_directory(out, ec),
                     "--out {} is a directory; give a file name such as "
                     "{}/report.html",
                     out.string(), out.string());
    write_file_atomic(out.string(),
                      render_report_html(o->run_dir, m, read_optional(run / "config.yaml"),
                                         read_optional(run / "run.json")));
    std::printf("report: %s\n", out.string().c_str());
    if (o->png) {
      const fs::path png =
          out.parent_path().empty() ? fs::path("loss.png") : out.parent_path() / "loss.png";
      write_file_atomic(png.string(), encode_png(plot_lines_png(loss_lines(m))));
      std::printf("loss plot: %s\n", png.string().c_str());
    }
  });
}

}  // namespace braid
