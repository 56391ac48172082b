// Loader's prefetch thread (bounded queue, ordered, clean shutdown) and ValidationSet.
#include "data/loader.h"

#include <algorithm>

namespace braid {

namespace {

void check_loader_config(const DataConfig& cfg) {
  if (cfg.grad_accum < 1) user_error("data.grad_accum is {}; expected >= 1", cfg.grad_accum);
  if (cfg.prefetch < 0) user_error("data.prefetch is {}; expected >= 0", cfg.prefetch);
}

}  // namespace

Loader::Loader(const std::string& shard_path, const DataConfig& cfg, int rank, int world,
               int64_t start_step, int micro_offset, int micro_stride)
    : shard_(shard_path),
      flags_(open_loss_flags(shard_, cfg)),
      sample_flags_(open_sample_flags(shard_)),
      cfg_(cfg),
      rank_(rank),
      world_(world),
      micro_offset_(micro_offset),
      micro_stride_(micro_stride),
      step_(start_step),
      micro_(0) {
  BRAID_CHECK(micro_stride >= 1 && micro_offset >= 0 && micro_offset < micro_stride,
              "micro offset {} of stride {}", micro_offset, micro_stride);
  check_loader_config(cfg_);
  if (cfg_.epochs > 0 || (cfg_.packing && sample_flags_))
    stream_ = std::make_unique<EpochStream>(
        index_epoch_units(shard_, sample_flags_ ? &*sample_flags_ : nullptr, cfg_), cfg_);
  BRAID_CHECK(start_step >= 0, "start_step {}", start_step);
  // Fail here, on the caller's thread, for a shard too short or a bad rank.
  (void)sample(step_, 0);
  start_producer();
}

Loader::~Loader() { stop_producer(); }

int64_t Loader::global_batch() const {
  return static_cast<int64_t>(cfg_.micro_batch) * world_ * cfg_.grad_accum * micro_stride_;
}

Batch Loader::sample(int64_t step, int micro) const {
  if (stream_) {
    const int B = cfg_.micro_batch, T = cfg_.seq_len;
    Batch b{Tensor::empty({B, T}, DType::I32), Tensor::empty({B, T}, DType::I32), Tensor()};
    if (stream_->packed()) b.sample_starts = Tensor::empty({B, T}, DType::I32);
    const int64_t global_micro = micro_offset_ + static_cast<int64_t>(micro) * micro_stride_;
    std::lock_guard<std::mutex> lock(stream_mu_);
    for (int r = 0; r < B; ++r) {
      const int64_t g = step * global_batch() + (global_micro * world_ + rank_) * B + r;
      const int64_t at = static_cast<int64_t>(r) * T;
      stream_->fill_row(shard_, flags_ ? &*flags_ : nullptr, g, b.tokens.i32() + at,
                        b.targets.i32() + at,
                        b.sample_starts.defined() ? b.sample_starts.i32() + at : nullptr);
    }
    return b;
  }
  return sample_train_batch(shard_, cfg_, step, micro_offset_ + micro * micro_stride_, rank_,
                            world_, flags_ ? &*flags_ : nullptr);
}

void Loader::start_producer() {
  if (cfg_.prefetch == 0) return;
  stop_ = false;
  error_ = nullptr;
  queue_.clear();
  thread_ = std::thread([this, s = step_, m = micro_] { produce(s, m); });
}

void Loader::stop_producer() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  queue_.clear();
}

void Loader::produce(int64_t step, int micro) {
  try {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || static_cast<int>(queue_.size()) < cfg_.prefetch; });
        if (stop_) return;
      }
      // Sampling runs unlocked so the consumer can take ready batches meanwhile.
      Batch b = sample(step, micro);
      {
        std::lock_guard<std::mutex> lock(mu_);
        queue_.push_back({step, micro, std::move(b)});
      }
      cv_.notify_all();
      if (++micro == cfg_.grad_accum) {
        micro = 0;
        ++step;
      }
    }
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      error_ = std::current_exception();
    }
    cv_.notify_all();
  }
}

Batch Loader::next() {
  Batch out;
  if (!thread_.joinable()) {
    out = sample(step_, micro_);
  } else {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !queue_.empty() || error_; });
    // Batches made before a failure are still valid; the error surfaces at its position.
    if (queue_.empty()) std::rethrow_exception(error_);
    Ready r = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    cv_.notify_all();
    BRAID_CHECK(r.step == step_ && r.micro == micro_,
                "prefetched batch ({}, {}) but expected ({}, {})", r.step, r.micro, step_, micro_);
    out = std::move(r.batch);
  }
  if (++micro_ == cfg_.grad_accum) {
    micro_ = 0;
    ++step_;
  }
  return out;
}

void Loader::seek(int64_t step) {
  BRAID_CHECK(step >= 0, "seek to step {}", step);
  stop_producer();
  step_ = step;
  micro_ = 0;
  start_producer();
}

ValidationSet::ValidationSet(const std::string& shard_path, const DataConfig& cfg, int rank,
                             int world)
    : shard_(shard_path),
      flags_(open_loss_flags(shard_, cfg)),
      sample_flags_(open_sample_flags(shard_)),
      cfg_(cfg),
      rank_(rank),
      world_(world) {
  BRAID_CHECK(rank >= 0 && rank < world, "rank {} of world {}", rank, world);
  if (cfg_.packing && sample_flags_) {
    cfg_.epochs = 0;  // one pass, repeated: no padding past the epochs
    stream_ = std::make_unique<EpochStream>(index_epoch_units(shard_, &*sample_flags_, cfg_), cfg_,
                                            /*shuffle=*/false);
    sequences_ = stream_->sequences_in_epoch(0);
    return;
  }
  (void)validation_pass_batches(shard_, cfg_, world_);  // fails early on a too-short shard
}

Batch ValidationSet::val_batch(int64_t index) const {
  if (!stream_)
    return validation_batch(shard_, cfg_, index, rank_, world_, flags_ ? &*flags_ : nullptr);
  BRAID_CHECK(index >= 0, "validation batch index {}", index);
  const int B = cfg_.micro_batch, T = cfg_.seq_len;
  Batch b{Tensor::empty({B, T}, DType::I32), Tensor::empty({B, T}, DType::I32),
          Tensor::empty({B, T}, DType::I32)};
  for (int r = 0; r < B; ++r) {
    const int64_t g = (index * world_ + rank_) * B + r;
    const int64_t at = static_cast<int64_t>(r) * T;
    int32_t *tokens = b.tokens.i32() + at, *targets = b.targets.i32() + at,
            *starts = b.sample_starts.i32() + at;
    if (g < sequences_) {
      stream_->fill_row(shard_, flags_ ? &*flags_ : nullptr, g, tokens, targets, starts);
    } else {  // past the last sequence: padding, one span
      std::fill(tokens, tokens + T, 0);
      std::fill(targets, targets + T, -1);
      std::fill(starts, starts + T, 0);
    }
  }
  return b;
}

int64_t ValidationSet::num_batches() const {
  if (!stream_) return validation_pass_batches(shard_, cfg_, world_);
  const int64_t per_batch = static_cast<int64_t>(cfg_.micro_batch) * world_;
  return std::max<int64_t>(1, (sequences_ + per_batch - 1) / per_batch);
}

}  // namespace braid
