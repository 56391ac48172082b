// Checks of a RunConfig against the world (paths, memory) and warnings for settings that are
// valid but silently do little.
#include <unistd.h>

#include <filesystem>

#include "core/input_guard.h"
#include "launch/config/config.h"
#include "launch/io/model_limits.h"
#include "optim/adamw.h"

namespace braid {

namespace fs = std::filesystem;

namespace {

// The nearest ancestor of p that exists ("." for a relative path with none).
fs::path nearest_existing(fs::path p) {
  std::error_code ec;
  p = fs::absolute(p, ec).lexically_normal();
  while (!p.empty() && !fs::exists(p, ec) && p != p.parent_path()) p = p.parent_path();
  return p;
}

void check_run_dir(const RunConfig& cfg) {
  std::error_code ec;
  const fs::path dir = cfg.run.dir;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    config_error("run.dir",
                 "run.dir '{}' exists and is not a directory; expected a directory "
                 "to hold run directories (created when missing)",
                 cfg.run.dir);
  const fs::path base = nearest_existing(dir);
  if (!fs::is_directory(base, ec))
    config_error("run.dir", "run.dir '{}' cannot be created: '{}' is not a directory", cfg.run.dir,
                 base.string());
  if (::access(base.c_str(), W_OK | X_OK) != 0)
    config_error("run.dir", "run.dir '{}' cannot be written: no write permission in '{}'",
                 cfg.run.dir, base.string());
}

void check_resume_path(const RunConfig& cfg) {
  const std::string& r = cfg.checkpoint.resume;
  if (r == "auto" || r == "none") return;
  std::error_code ec;
  const fs::path p = r;
  if (!fs::exists(p / "manifest.json", ec) && fs::exists(p / "config.json", ec))
    config_error("checkpoint.resume",
                 "checkpoint.resume '{}' is a Hugging Face model directory, not a braid "
                 "checkpoint; convert it with `braid import {} --out runs/<name>` and fine-tune "
                 "with run.init_from=runs/<name> (or set run.init_from={} directly)",
                 r, r, r);
}

}  // namespace

void check_run_config_environment(const RunConfig& cfg) {
  check_run_dir(cfg);
  check_resume_path(cfg);
  try {
    check_model_fits(cfg.model, 16);  // weights, gradients and two AdamW moments, f32
  } catch (const ConfigError& e) {
    throw ConfigError("model." + e.key(), e.what());
  }
}

std::vector<std::string> config_warnings(const RunConfig& cfg) {
  std::vector<std::string> w;
  const OptimConfig& o = cfg.optim;
  const int steps = cfg.train.steps;
  if (steps == 0) return w;  // data.epochs decides the length once the data is read
  if (o.warmup_steps >= steps)
    w.push_back(
        fmt::format("optim.warmup_steps ({}) >= train.steps ({}): the run ends during "
                    "warmup at lr {:.3g}, never reaching optim.lr {:.3g}",
                    o.warmup_steps, steps, lr_at(o, steps - 1, steps), o.lr));
  if (o.decay != "constant" && o.warmup_steps < steps) {
    if (o.decay_steps > steps)
      w.push_back(
          fmt::format("optim.decay_steps ({}) > train.steps ({}): the {} decay is cut "
                      "off and ends at lr {:.3g}, not optim.min_lr {:.3g}",
                      o.decay_steps, steps, o.decay, lr_at(o, steps - 1, steps), o.min_lr));
    else if (o.decay_steps > 0 && o.decay_steps <= o.warmup_steps)
      w.push_back(
          fmt::format("optim.decay_steps ({}) <= optim.warmup_steps ({}): there is no "
                      "decay; the lr drops from optim.lr to optim.min_lr right after "
                      "warmup",
                      o.decay_steps, o.warmup_steps));
    if (o.min_lr == o.lr)
      w.push_back(
          fmt::format("optim.min_lr equals optim.lr ({:.3g}): the {} decay does nothing "
                      "(use decay: constant to say so)",
                      o.lr, o.decay));
  }
  return w;
}

}  // namespace braid
