// The configuration reference (Markdown), generated from the config structs' visit lists.
#include <map>

#include "launch/config/config.h"
#include "launch/config/config_schema.h"

namespace braid {

namespace {

// One line per section for the reference; the structs document their fields, not themselves.
const std::map<std::string, std::string>& section_blurbs() {
  static const std::map<std::string, std::string> blurbs = {
      {"run",
       "Where the run lives: `<dir>/<name>/` holds the resolved config, metrics and checkpoints."},
      {"model", "The model's shape and initialisation (core/model_config.h)."},
      {"data", "Token shards and how batches are drawn (data/data_config.h)."},
      {"optim", "AdamW, the learning-rate schedule and gradient clipping (optim/optim_config.h)."},
      {"train",
       "The training loop: length, logging, evaluation and the final sample "
       "(launch/config/train_config.h)."},
      {"checkpoint",
       "When checkpoints are written, how many are kept, and resuming "
       "(launch/config/checkpoint_config.h)."},
      {"lora",
       "Low-rank adapters on a frozen base model; off while rank is 0 "
       "(core/models/lora_config.h)."},
      {"parallel",
       "The rank mesh under mpirun, communication timeouts and data-parallel gradient buckets "
       "(parallel/parallel_config.h). A plain `braid train` is one rank."},
  };
  return blurbs;
}

// Markdown table cells cannot hold a bare '|'.
std::string cell(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::string config_reference_markdown() {
  RunConfig defaults;
  std::string out;
  std::string section;
  for (const auto& f : list_config_fields(defaults)) {
    if (f.section != section) {
      section = f.section;
      out += fmt::format("\n## `{}`\n\n", section);
      if (auto it = section_blurbs().find(section); it != section_blurbs().end())
        out += it->second + "\n\n";
      out += "| key | type | default | description |\n| --- | --- | --- | --- |\n";
    }
    out += fmt::format("| `{}` | {} | `{}` | {} |\n", f.key, field_type_name(f.ptr),
                       cell(format_field(f.ptr)), cell(f.doc));
  }
  return out;
}

}  // namespace braid
