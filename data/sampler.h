// Batch sampling as pure functions of integers: any batch can be recomputed without replay.
#pragma once

#include <cstdint>
#include <optional>

#include "core/tensor.h"
#include "data/data_config.h"
#include "data/shard.h"

namespace braid {

// One micro-batch. targets[b, t] is the token after tokens[b, t] in the shard.
struct Batch {
  Tensor tokens;   // (B, T) i32
  Tensor targets;  // (B, T) i32
  // Packed rows (several samples per row): (B, T) i32, where the sample holding each position
  // begins (MicroBatch::sample_starts); undefined when every row is one window.
  Tensor sample_starts = Tensor();
};

// Counter-based RNG: a well-mixed 64-bit hash of (seed, a, b, c) (splitmix64 finalizer
// chained over the inputs). Equal inputs give equal outputs on every platform.
uint64_t counter_hash(uint64_t seed, uint64_t a, uint64_t b, uint64_t c);

// Start of training row `global_row` of micro-batch (step, micro): uniform in
// [0, num_starts). Global rows of one micro-batch are numbered across data-parallel ranks:
// rank r of world w takes rows r*B .. r*B+B-1, so the union over ranks depends only on the
// global batch (w*B), not on how it is split.
int64_t train_window_start(uint64_t seed, int64_t step, int micro, int64_t global_row,
                           int64_t num_starts);

// The training micro-batch (step, micro) of `rank` out of `world`: cfg.micro_batch windows of
// cfg.seq_len + 1 tokens at random offsets. A shard shorter than seq_len + 1 tokens is a
// braid::UserError.
// With flags (the shard's per-token flags, data/prepare.h), a target whose token is not
// trained is -1 (ignored by the loss).
Batch sample_train_batch(const TokenShard& shard, const DataConfig& cfg, int64_t step, int micro,
                         int rank, int world, const TokenShard* flags = nullptr);

// Validation uses fixed windows (seed-independent) so losses are comparable across steps:
// the shard is cut into W = (N - 1) / T windows at stride T (each target predicted once per
// pass); global row g of batch i (g = (i * world + rank) * B + b) takes window
// (g * stride) mod W with stride coprime to W, which spreads the first batches over the
// whole file and visits every window once per pass. Indices past one pass wrap around.
Batch validation_batch(const TokenShard& shard, const DataConfig& cfg, int64_t index, int rank,
                       int world, const TokenShard* flags = nullptr);

// Sets targets[t] = -1 for t in [0, T) where the token at start + 1 + t is not trained (bit 0
// of flags clear): the targets of a window of T + 1 tokens starting at `start`.
void apply_loss_mask(const TokenShard& flags, int64_t start, int T, int32_t* targets);

// The flags shard beside a token shard ("train.bin" -> "train.flags.bin"), opened when it exists
// and cfg.train_on is "completions"; its length must match the shard's (braid::UserError).
std::optional<TokenShard> open_loss_flags(const TokenShard& shard, const DataConfig& cfg);
// The same file whatever cfg.train_on (its sample starts drive packing and epochs); nullopt
// when the shard has none (plain text data).
std::optional<TokenShard> open_sample_flags(const TokenShard& shard);
// Batches in one pass over every validation window (at least 1).
int64_t validation_pass_batches(const TokenShard& shard, const DataConfig& cfg, int world);

}  // namespace braid
