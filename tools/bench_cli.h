// Command-line parsing shared by the benchmarks (CLI11, as the braid binary): parse, and on
// --help or a usage error print what CLI11 says and give the exit code the caller returns.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>

#include "core/model_config.h"

namespace braid::bench {

// nullopt when the arguments parsed and the benchmark should run; else the exit code: 0 after
// --help, 2 for a usage error (unknown option, missing or malformed value).
inline std::optional<int> parse_args(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  return std::nullopt;
}

// The model-shape options the training benchmarks share, into cfg (whose values are the
// defaults shown in --help).
inline void add_model_options(CLI::App& app, ModelConfig& cfg) {
  app.add_option("--family", cfg.family, "model family: gpt2 or llama");
  app.add_option("--vocab", cfg.vocab_size, "vocabulary size");
  app.add_option("--ctx", cfg.context_length, "context length (tokens per sequence)");
  app.add_option("--layers", cfg.n_layer, "transformer blocks");
  app.add_option("--width", cfg.n_embd, "model width");
  app.add_option("--heads", cfg.n_head, "attention heads");
}

}  // namespace braid::bench
