// DataConfig: where token shards come from and how batches are drawn.
#pragma once

#include <cstdint>
#include <string>

#include "core/config_fields.h"

namespace braid {

struct DataConfig {
  std::string dir = "";
  int micro_batch = 8;
  int seq_len = 256;
  int grad_accum = 1;
  uint64_t seed = 42;
  int prefetch = 2;

  template <class V>
  void visit(V& v) {
    v("dir", dir, "Directory written by `braid prepare`: train.bin, val.bin and tokenizer.json. Relative paths are relative to the config file.");
    v("micro_batch", micro_batch, "Sequences per micro-batch.");
    v("seq_len", seq_len, "Tokens per sequence; at most model.context_length.");
    v("grad_accum", grad_accum, "Micro-batches accumulated per optimizer step.");
    v("seed", seed, "Sampling seed: (seed, step, micro-batch) decide every batch, so a resumed run sees the same data.");
    v("prefetch", prefetch, "Batches prepared ahead on a background thread (0 disables the thread).");
  }
  void validate() const;
};

}  // namespace braid
