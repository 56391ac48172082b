// Loader: training batches in (step, micro) order with optional background prefetch;
// ValidationSet: fixed validation batches.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "data/data_config.h"
#include "data/epochs.h"
#include "data/sampler.h"
#include "data/shard.h"

namespace braid {

// Owns the mapped training shard. next() returns the batches (step, 0), (step, 1), ...,
// (step, grad_accum - 1), (step + 1, 0), ... exactly as sample_train_batch would, so a
// resumed run (start_step) sees the same data as an uninterrupted one. With cfg.prefetch > 0
// a background thread keeps up to cfg.prefetch batches ready; an exception on that thread is
// rethrown by next(). Not thread-safe: one consumer.
//
// Data-parallel ranks split a step's micro-batches, not their rows: with micro_stride = dp and
// micro_offset = the DP rank, this loader's m-th micro-batch of a step is the step's global
// micro-batch m * dp + rank (of a loader with rank 0 of world 1), so the union over the ranks is
// exactly the one-rank run with dp times the grad_accum, whatever the layout.
//
// Epoch mode (cfg.epochs > 0, or packed samples: cfg.packing with sample-structured data):
// batches come from an EpochStream (data/epochs.h) instead of random windows. Row b of this
// loader's micro-batch m of step s is the run's global sequence
// s * G + ((micro_offset + m * micro_stride) * world + rank) * B + b, G the sequences of a
// step over every rank, so the data-parallel ranks take disjoint parts of each epoch.
class Loader {
 public:
  Loader(const std::string& shard_path, const DataConfig& cfg, int rank = 0, int world = 1,
         int64_t start_step = 0, int micro_offset = 0, int micro_stride = 1);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  Batch next();
  // The next batch returned will be (step, 0). Drops prefetched batches.
  void seek(int64_t step);

  // Position of the batch the next call to next() returns.
  int64_t step() const { return step_; }
  int micro() const { return micro_; }
  const TokenShard& shard() const { return shard_; }
  // Whether targets can be -1 (a loss mask, or padding of epoch mode).
  bool masked() const { return flags_.has_value() || stream_ != nullptr; }
  // Epoch mode's stream, or null. Its methods are not thread-safe: call them through
  // with_epochs, which holds the producer off.
  bool epoch_mode() const { return stream_ != nullptr; }
  template <class F>
  auto with_epochs(F&& f) const {
    std::lock_guard<std::mutex> lock(stream_mu_);
    return f(*stream_);
  }
  // Sequences per optimizer step over every rank (B x world x grad_accum x micro_stride).
  int64_t global_batch() const;

 private:
  struct Ready {
    int64_t step;
    int micro;
    Batch batch;
  };
  void start_producer();
  void stop_producer();
  void produce(int64_t step, int micro);
  Batch sample(int64_t step, int micro) const;

  TokenShard shard_;
  std::optional<TokenShard> flags_;  // per-token loss mask, when prepared and trained on
  std::optional<TokenShard> sample_flags_;  // sample starts, when prepared from JSONL
  std::unique_ptr<EpochStream> stream_;     // epoch mode
  mutable std::mutex stream_mu_;
  DataConfig cfg_;
  int rank_;
  int world_;
  int micro_offset_;
  int micro_stride_;
  int64_t step_;  // consumer position
  int micro_;

  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;  // signals both "queue changed" and "stop"
  std::deque<Ready> queue_;
  bool stop_ = false;
  std::exception_ptr error_;
};

// The mapped validation shard and its fixed batches. Plain text: windows of seq_len + 1 tokens
// (see validation_batch in sampler.h). Sample-structured data (prepared from JSONL) with
// cfg.packing: the samples packed into sequences as training packs them (greedily, whole
// samples, positions and attention per sample: batches carry sample_starts), in shard order
// without shuffling; batch i holds sequences [(i * world + rank) * B, ... + B), those past the
// last sequence being padding (no targets). Without packing: windows, as plain text.
class ValidationSet {
 public:
  ValidationSet(const std::string& shard_path, const DataConfig& cfg, int rank = 0, int world = 1);

  // Same index -> same batch, whatever the seed or training step.
  Batch val_batch(int64_t index) const;
  // Batches in one pass over every window (or every packed sequence).
  int64_t num_batches() const;
  const TokenShard& shard() const { return shard_; }
  // Whether batches are packed samples (else fixed windows).
  bool packed() const { return stream_ != nullptr; }

 private:
  TokenShard shard_;
  std::optional<TokenShard> flags_;
  std::optional<TokenShard> sample_flags_;
  std::unique_ptr<EpochStream> stream_;  // packed samples, in shard order
  int64_t sequences_ = 0;                 // packed sequences in one pass
  DataConfig cfg_;
  int rank_;
  int world_;
};

}  // namespace braid
