// Finite passes over the training data (data.epochs, data.packing): every epoch's sequences as
// pure functions of (seed, epoch), so any step's batch is recomputed without replay.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "data/data_config.h"
#include "data/shard.h"

namespace braid {

// Tokens [start, start + length) of the shard, length >= 2: its first length - 1 tokens are
// inputs, its last length - 1 tokens their targets.
struct DataUnit {
  int64_t start = 0;
  int64_t length = 0;
};

// What an epoch is made of: the samples of sample-structured data (a flags shard with sample
// starts, written by `braid prepare` for JSONL inputs), or else the windows of seq_len + 1
// tokens at stride seq_len that cover the shard (each target once).
struct EpochUnits {
  std::vector<DataUnit> units;
  bool samples = false;    // units are samples (else windows)
  int64_t truncated = 0;   // samples longer than seq_len + 1 tokens, cut to seq_len + 1
  int64_t dropped = 0;     // samples longer than seq_len + 1 tokens, left out
  int64_t too_short = 0;   // samples of one token (nothing to predict), left out
  int64_t longest = 0;     // tokens of the longest sample before truncation
};

// The units of `shard`. sample_flags: its flags shard (bit 1 = a sample starts here), or null
// for plain text. Samples longer than seq_len + 1 tokens are truncated or dropped by
// cfg.overlong. No unit at all is a braid::UserError naming the shard.
EpochUnits index_epoch_units(const TokenShard& shard, const TokenShard* sample_flags,
                             const DataConfig& cfg);

// The order of epoch `epoch`'s units: a permutation of 0 .. n - 1 seeded by (seed, epoch)
// (Fisher-Yates over a counter-based stream; the same on every platform).
std::vector<int64_t> epoch_order(uint64_t seed, int64_t epoch, int64_t n);

// Global sequences: sequence g of the run is the k-th sequence of some epoch; step s takes
// sequences [s * global_batch, (s + 1) * global_batch), so the data of a step depends only on
// the global batch, not on how the ranks split it. With packing, a sequence holds as many
// whole units, in the epoch's order, as fit (greedily) in seq_len inputs; else one unit.
// Past data.epochs (when > 0) sequences are empty (every target -1).
class EpochStream {
 public:
  // shuffle false: every epoch takes the units in shard order (validation).
  EpochStream(EpochUnits units, const DataConfig& cfg, bool shuffle = true);

  // Sequences in epoch e (>= 1).
  int64_t sequences_in_epoch(int64_t e);
  // (epoch, index in that epoch) of global sequence g.
  std::pair<int64_t, int64_t> locate(int64_t g);
  // Sequences in the first data.epochs epochs (data.epochs > 0).
  int64_t total_sequences();
  // Whether rows carry sample starts (packed samples).
  bool packed() const { return packed_; }
  const EpochUnits& units() const { return units_; }

  // Row of global sequence g: tokens and targets (T each; padding: token 0, target -1),
  // the loss mask of `loss_flags` applied (bit 0 clear: target -1), and, when packed(), each
  // position's sample start in starts (T).
  void fill_row(const TokenShard& shard, const TokenShard* loss_flags, int64_t g, int32_t* tokens,
                int32_t* targets, int32_t* starts);

 private:
  struct Plan {
    std::vector<int64_t> order;      // unit indices in this epoch's order
    std::vector<int64_t> seq_begin;  // sequence k holds order[seq_begin[k] .. seq_begin[k+1])
  };
  const Plan& plan(int64_t e);

  EpochUnits units_;
  uint64_t seed_;
  int seq_len_;
  int epochs_;
  bool packed_;
  bool shuffle_;
  std::map<int64_t, Plan> plans_;       // the last few epochs used
  std::vector<int64_t> epoch_offsets_;  // first global sequence of epoch e, known so far
};

}  // namespace braid
