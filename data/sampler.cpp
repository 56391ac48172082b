// Counter-based window sampling for training and fixed windows for validation.
#include "data/sampler.h"

#include "data/prepare.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <vector>

namespace braid {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

void check_args(const TokenShard& shard, const DataConfig& cfg, int rank, int world) {
  BRAID_CHECK(world >= 1 && rank >= 0 && rank < world, "rank {} of world {}", rank, world);
  if (cfg.micro_batch < 1 || cfg.seq_len < 1)
    user_error("data.micro_batch is {} and data.seq_len is {}; both must be >= 1",
               cfg.micro_batch, cfg.seq_len);
  if (shard.size() < static_cast<int64_t>(cfg.seq_len) + 1)
    user_error("token shard '{}' holds {} tokens; data.seq_len {} needs at least {} (use more "
               "text or a smaller seq_len)", shard.path(), shard.size(), cfg.seq_len,
               cfg.seq_len + 1);
}

// Fills row `row` of a batch with the window of T + 1 tokens starting at `start`.
void fill_row(const TokenShard& shard, int64_t start, int T, int32_t* tokens, int32_t* targets,
              std::vector<int32_t>& window, const TokenShard* flags) {
  window.resize(static_cast<size_t>(T) + 1);
  shard.read(start, T + 1, window.data());
  std::copy(window.begin(), window.end() - 1, tokens);
  std::copy(window.begin() + 1, window.end(), targets);
  if (flags) apply_loss_mask(*flags, start, T, targets);
}

Batch empty_batch(const DataConfig& cfg) {
  return {Tensor::empty({cfg.micro_batch, cfg.seq_len}, DType::I32),
          Tensor::empty({cfg.micro_batch, cfg.seq_len}, DType::I32), Tensor()};
}

int64_t validation_windows(const TokenShard& shard, const DataConfig& cfg) {
  return (shard.size() - 1) / cfg.seq_len;
}

}  // namespace

uint64_t counter_hash(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
  uint64_t h = splitmix64(seed);
  h = splitmix64(h ^ a);
  h = splitmix64(h ^ b);
  return splitmix64(h ^ c);
}

int64_t train_window_start(uint64_t seed, int64_t step, int micro, int64_t global_row,
                           int64_t num_starts) {
  BRAID_CHECK(num_starts > 0, "num_starts {}", num_starts);
  const uint64_t h = counter_hash(seed, static_cast<uint64_t>(step), static_cast<uint64_t>(micro),
                                  static_cast<uint64_t>(global_row));
  // Multiply-shift range reduction: unbiased enough for any shard and no division.
  return static_cast<int64_t>((static_cast<unsigned __int128>(h) * static_cast<uint64_t>(num_starts)) >> 64);
}

Batch sample_train_batch(const TokenShard& shard, const DataConfig& cfg, int64_t step, int micro,
                         int rank, int world, const TokenShard* flags) {
  check_args(shard, cfg, rank, world);
  const int B = cfg.micro_batch, T = cfg.seq_len;
  const int64_t num_starts = shard.size() - T;  // windows of T + 1 tokens
  Batch batch = empty_batch(cfg);
  std::vector<int32_t> window;
  for (int b = 0; b < B; ++b) {
    const int64_t global_row = static_cast<int64_t>(rank) * B + b;
    const int64_t start = train_window_start(cfg.seed, step, micro, global_row, num_starts);
    fill_row(shard, start, T, batch.tokens.i32() + static_cast<int64_t>(b) * T,
             batch.targets.i32() + static_cast<int64_t>(b) * T, window, flags);
  }
  return batch;
}

Batch validation_batch(const TokenShard& shard, const DataConfig& cfg, int64_t index, int rank,
                       int world, const TokenShard* flags) {
  check_args(shard, cfg, rank, world);
  BRAID_CHECK(index >= 0, "validation batch index {}", index);
  const int B = cfg.micro_batch, T = cfg.seq_len;
  const int64_t W = validation_windows(shard, cfg);
  // A stride near W / golden ratio, made coprime to W so (g * stride) mod W is a permutation.
  int64_t stride = std::max<int64_t>(1, static_cast<int64_t>(std::llround(W * 0.6180339887)));
  while (std::gcd(stride, W) != 1) ++stride;
  Batch batch = empty_batch(cfg);
  std::vector<int32_t> window;
  for (int b = 0; b < B; ++b) {
    const int64_t g = (index * world + rank) * B + b;
    const int64_t w = static_cast<int64_t>((static_cast<unsigned __int128>(g % W) * stride) % W);
    fill_row(shard, w * T, T, batch.tokens.i32() + static_cast<int64_t>(b) * T,
             batch.targets.i32() + static_cast<int64_t>(b) * T, window, flags);
  }
  return batch;
}

void apply_loss_mask(const TokenShard& flags, int64_t start, int T, int32_t* targets) {
  std::vector<int32_t> f(static_cast<size_t>(T));
  flags.read(start + 1, T, f.data());
  for (int t = 0; t < T; ++t)
    if ((f[static_cast<size_t>(t)] & kFlagTrained) == 0) targets[t] = -1;
}

std::optional<TokenShard> open_loss_flags(const TokenShard& shard, const DataConfig& cfg) {
  if (cfg.train_on != TrainOn::Completions) return std::nullopt;
  return open_sample_flags(shard);
}

std::optional<TokenShard> open_sample_flags(const TokenShard& shard) {
  std::string path = shard.path();
  if (!path.ends_with(".bin")) return std::nullopt;
  path = path.substr(0, path.size() - 4) + ".flags.bin";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  TokenShard flags(path);
  if (flags.size() != shard.size() || flags.vocab_size() != 4)
    user_error("loss-mask file '{}' holds {} values (vocabulary {}) but '{}' holds {} tokens; "
               "expected one flag per token (vocabulary 4). Prepare the data again with `braid "
               "prepare`",
               path, flags.size(), flags.vocab_size(), shard.path(), shard.size());
  return flags;
}

int64_t validation_pass_batches(const TokenShard& shard, const DataConfig& cfg, int world) {
  check_args(shard, cfg, 0, world);
  const int64_t per_batch = static_cast<int64_t>(cfg.micro_batch) * world;
  return std::max<int64_t>(1, (validation_windows(shard, cfg) + per_batch - 1) / per_batch);
}

}  // namespace braid
