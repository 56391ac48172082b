// DataConfig: where token shards come from and how batches are drawn.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "core/config_fields.h"

namespace braid {

// Which tokens get a loss (data.train_on): Completions skips the tokens `braid prepare`
// marked untrained (prompts); All trains on every token.
enum class TrainOn { Completions, All };

constexpr std::array<EnumName<TrainOn>, 2> config_enum_names(TrainOn) {
  return {{{TrainOn::Completions, "completions"}, {TrainOn::All, "all"}}};
}

struct DataConfig {
  std::string dir = "";
  int micro_batch = 8;
  int seq_len = 256;
  int grad_accum = 1;
  uint64_t seed = 42;
  int prefetch = 2;
  TrainOn train_on = TrainOn::Completions;

  template <class V>
  void visit(V& v) {
    v("dir", dir, "Directory written by `braid prepare`: train.bin, val.bin and tokenizer.json. Relative paths are relative to the config file.");
    v("micro_batch", micro_batch, "Sequences per micro-batch.");
    v("seq_len", seq_len, "Tokens per sequence; at most model.context_length.");
    v("grad_accum", grad_accum, "Micro-batches accumulated per optimizer step.");
    v("seed", seed, "Sampling seed: (seed, step, micro-batch) decide every batch, so a resumed run sees the same data.");
    v("train_on", train_on, "completions: tokens marked untrained by `braid prepare` (the prompts of .jsonl prompt/completion samples) get no loss; all: every token is trained. Data without a loss mask trains on every token either way.");
    v("prefetch", prefetch, "Batches prepared ahead on a background thread (0 disables the thread).");
  }
  void validate() const;
};

}  // namespace braid
