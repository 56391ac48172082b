// The `braid` binary: parses the subcommand and turns errors into messages and exit codes
// (0 success, 1 bad input or a failed run, 2 usage error, 3 internal error).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/cuda/cudnn_attention.h"
#include "core/kernels/cuda/runtime.h"
#include "launch/calibrate/calibrate.h"
#include "launch/cli/commands.h"
#include "launch/config/edit_distance.h"
#include "launch/plan/plan_command.h"
#include "launch/train/exec_setup.h"
#include "launch/train/signals.h"

namespace {

// "unknown command 'trian'; did you mean 'train'?" for a first argument that names no
// subcommand; nullopt when it is one (or an option).
std::optional<std::string> unknown_command(CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return std::nullopt;
  const std::string typed = argv[1];
  std::string best, names;
  size_t best_d = SIZE_MAX;
  for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    if (sub->get_name() == typed) return std::nullopt;
    names += (names.empty() ? "" : ", ") + sub->get_name();
    const size_t d = braid::edit_distance(typed, sub->get_name());
    if (d < best_d) best_d = d, best = sub->get_name();
  }
  std::string msg = "unknown command '" + typed + "'";
  if (best_d <= std::max<size_t>(2, typed.size() / 2)) msg += "; did you mean '" + best + "'?";
  return msg + " (commands: " + names + "; see braid --help)";
}

// No braid option takes a negative, infinite or NaN number; CLI11's own range checks let NaN
// through and read "-1" into an unsigned seed as 2^64 - 1, so every numeric option gets this.
void reject_negative_numbers(CLI::App& app) {
  const CLI::Validator finite_non_negative(
      [](std::string& s) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        if (end == s.c_str()) return "";  // not a number: the type conversion reports it
        if (!std::isfinite(v)) return "'" + s + "' is not a finite number";
        if (v < 0 || s.find('-') == 0) return "'" + s + "' is negative; expected a number >= 0";
        return "";
      },
      "");  // no text: the type and default stay readable in --help
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    for (CLI::Option* opt : sub->get_options()) {
      const std::string t = opt->get_type_name();
      if (t.rfind("INT", 0) == 0 || t.rfind("UINT", 0) == 0 || t.rfind("FLOAT", 0) == 0)
        opt->check(finite_non_negative);
    }
}

}  // namespace

int main(int argc, char** argv) {
  // First, before any thread exists: SIGTERM, SIGINT and SIGUSR1 run their handlers on one
  // thread of their own, never on a thread inside a GEMM kernel (launch/train/signals.h).
  // `braid supervise` waits for those signals itself (sigtimedwait) and stays as it is.
  if (argc < 2 || std::string_view(argv[1]) != "supervise") braid::start_signal_thread();
  CLI::App app{"braid: train GPT-2 and Llama style language models", "braid"};
  // Every option's default is shown in --help; subcommands inherit this.
  app.option_defaults()->always_capture_default();
  app.require_subcommand(1);
  app.set_version_flag("--version,-V", [] {
    const braid::cuda::BuildInfo b = braid::cuda::build_info();
    std::string v = "braid " BRAID_VERSION_STRING "\n";
    // The CPU kernels' level: this CPU's highest, or the one BRAID_CPU_ISA caps it at.
    const std::string machine(braid::cpu_isa_name(braid::cpu_isa_detected()));
    try {
      const std::string used(braid::cpu_isa_name(braid::cpu_isa_from_env()));
      v += "cpu: " + used +
           (used == machine ? " (this CPU's highest path; BRAID_CPU_ISA can cap it)"
                            : " (BRAID_CPU_ISA; this CPU's highest is " + machine + ")") +
           "\n";
    } catch (const std::exception& e) {
      v += "cpu: " + machine + " (" + e.what() + ")\n";
    }
    if (!b.built)
      return v + "CUDA backend: no (built without the CUDA toolkit or with BRAID_CUDA=OFF)";
    v += "CUDA backend: yes (CUDA runtime " + b.runtime + ", " + b.libraries + "; architectures " +
         b.archs + ")";
#if BRAID_WITH_CUDA
    v += "\n  attention: " + braid::cuda::cudnn_status();
#endif
    // What `train.device: auto` will find: the GPUs the CUDA runtime sees, or why none.
    const int gpus = braid::cuda::device_count();
    if (gpus > 0)
      v += "\n  GPUs: " + std::to_string(gpus) + " visible (" + braid::cuda::device_props(0).str() +
           (gpus > 1 ? ", ..." : "") + ")";
    else
      v += "\n  GPUs: none usable (" + braid::cuda::unavailable_reason() + ")";
    const int pending = braid::cuda::pending_kernel_count();
    if (pending > 0) v += "\n  " + std::to_string(pending) + " ops have no CUDA kernel yet";
    return v;
  });
  braid::add_train_command(app);
  braid::add_prepare_command(app);
  braid::add_eval_command(app);
  braid::add_generate_command(app);
  braid::add_export_command(app);
  braid::add_import_command(app);
  braid::add_merge_lora_command(app);
  braid::add_plan_command(app, braid::plan::calibrate_machine);
  braid::add_report_command(app);
  braid::add_supervise_command(app);
  reject_negative_numbers(app);
  if (auto msg = unknown_command(app, argc, argv)) {
    std::fprintf(stderr, "error: %s\n", msg->c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" with exit code 0; every real one is a usage error.
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  } catch (const braid::UserError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::filesystem::filesystem_error& e) {
    // A path braid was told to use cannot be created, read or renamed: the user's to fix.
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr,
                 "error: out of memory; use a smaller model (model.*), batch "
                 "(data.micro_batch, data.seq_len) or --batch\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "internal error: %s\n", e.what());
    return 3;
  }
  return 0;
}
