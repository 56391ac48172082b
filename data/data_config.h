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

// What happens to a sample longer than seq_len + 1 tokens (data.overlong).
enum class Overlong { Truncate, Drop };

constexpr std::array<EnumName<Overlong>, 2> config_enum_names(Overlong) {
  return {{{Overlong::Truncate, "truncate"}, {Overlong::Drop, "drop"}}};
}

struct DataConfig {
  std::string dir = "";
  int micro_batch = 8;
  int seq_len = 256;
  int grad_accum = 1;
  uint64_t seed = 42;
  int prefetch = 2;
  TrainOn train_on = TrainOn::Completions;
  int global_batch = 0;
  bool packing = true;
  Overlong overlong = Overlong::Truncate;
  int epochs = 0;

  template <class V>
  void visit(V& v) {
    v("dir", dir, "Directory written by `braid prepare`: train.bin, val.bin and tokenizer.json. Relative paths are relative to the config file.");
    v("micro_batch", micro_batch, "Sequences per micro-batch.");
    v("seq_len", seq_len, "Tokens per sequence; at most model.context_length.");
    v("grad_accum", grad_accum, "Micro-batches accumulated per optimizer step (per data-parallel rank). Leave it at 1 when global_batch is set: it is derived.");
    v("global_batch", global_batch, "Sequences per optimizer step over all data-parallel ranks; 0: micro_batch x grad_accum x the data-parallel ranks. When set, grad_accum = global_batch / (micro_batch x data-parallel ranks), which must divide exactly; a resume on another rank count keeps it.");
    v("seed", seed, "Sampling seed: (seed, step, micro-batch) decide every batch, so a resumed run sees the same data.");
    v("train_on", train_on, "completions: tokens marked untrained by `braid prepare` (the prompts of .jsonl prompt/completion samples) get no loss; all: every token is trained. Data without a loss mask trains on every token either way.");
    v("packing", packing, "Sample-structured data (prepared from .jsonl): fill each sequence with whole samples, in the epoch's order, as many as fit; attention never crosses a sample boundary and positions restart at 0 in each sample. false: one sample per sequence, the rest padding. Plain text data is not affected.");
    v("overlong", overlong, "A sample longer than seq_len + 1 tokens: truncate (keep its first seq_len + 1 tokens) or drop (leave it out). The start of training reports how many.");
    v("epochs", epochs, "Passes over the training data, each a fresh shuffle (seeded by seed and the epoch) without replacement; 0: windows drawn at random with replacement (plain text) or endless passes (packed samples). With epochs set and train.steps not set, training ends after that many passes; with both set, train.steps decides and passes continue past epochs.");
    v("prefetch", prefetch, "Batches prepared ahead on a background thread (0 disables the thread).");
  }
  void validate() const;
};

}  // namespace braid
