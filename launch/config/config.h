// YAML config files <-> RunConfig: loading with --set overrides and located errors, the resolved
// config written back as YAML, and the generated configuration reference.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "launch/config/train_config.h"

namespace braid {

// Reads the YAML file at `path` onto a default RunConfig, applies `overrides` in order (each
// "section.key=value", the value parsed as YAML), resolves a relative data.dir (against the
// config file's directory when it comes from the file, against the working directory when it
// comes from an override), then validates every section and the cross-section rules.
// Every problem is a braid::UserError naming the file and line (or the override), the full key
// and what would be right; key-specific ones are braid::ConfigError with key() == "optim.lr".
RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides);

// Maps YAML text onto a default RunConfig without validating it or resolving paths.
// `source` names the text in messages (a file path).
RunConfig parse_run_config(const std::string& yaml_text, const std::string& source);

// Applies one "section.key=value" assignment (what follows --set), type-checked like the file.
void apply_override(RunConfig& cfg, const std::string& assignment);

// Validates every section and the cross-section rules; messages name the full key but no file.
void validate_run_config(const RunConfig& cfg);

// Checks against this machine (load_run_config calls it): run.dir can be a directory and is
// writable, checkpoint.resume is not an HF directory, the model fits in memory. Throws
// braid::ConfigError with the full key.
void check_run_config_environment(const RunConfig& cfg);

// Settings that are valid but silently do little (warmup longer than the run, a decay cut off
// by the end of training, ...), one sentence each. load_run_config prints them to stderr.
std::vector<std::string> config_warnings(const RunConfig& cfg);

// The resolved config as YAML: every key of every section, so loading it reproduces `cfg`
// exactly (floats are written in their shortest exact form).
std::string dump_run_config(const RunConfig& cfg);
// Writes dump_run_config(cfg) to `path` atomically (temp file, fsync, rename). The parent
// directory must exist.
void save_run_config(const RunConfig& cfg, const std::filesystem::path& path);

// The keys whose values differ, as "optim.lr: 0.001 -> 0.002" (empty when a equals b).
std::vector<std::string> config_differences(const RunConfig& a, const RunConfig& b);

// The configuration reference in Markdown, generated from the visit lists: one table per
// section with key, type, default and doc. docs/config.md is this plus an introduction.
std::string config_reference_markdown();

}  // namespace braid
