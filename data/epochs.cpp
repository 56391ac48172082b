// Epoch units (samples or windows), per-epoch shuffles and greedy packing into sequences.
#include "data/epochs.h"

#include <algorithm>
#include <numeric>

#include "data/prepare.h"
#include "data/sampler.h"

namespace braid {

namespace {

// Flags are read in chunks so indexing a large shard needs little memory.
constexpr int64_t kFlagChunk = 1 << 16;

}  // namespace

EpochUnits index_epoch_units(const TokenShard& shard, const TokenShard* sample_flags,
                             const DataConfig& cfg) {
  EpochUnits u;
  const int64_t T = cfg.seq_len, N = shard.size();
  if (!sample_flags) {
    for (int64_t start = 0; start + T + 1 <= N; start += T) u.units.push_back({start, T + 1});
  } else {
    u.samples = true;
    BRAID_CHECK(sample_flags->size() == N, "flags {} vs shard {}", sample_flags->size(), N);
    auto add = [&](int64_t start, int64_t end) {
      const int64_t n = end - start;
      u.longest = std::max(u.longest, n);
      if (n < 2) {
        ++u.too_short;
      } else if (n <= T + 1) {
        u.units.push_back({start, n});
      } else if (cfg.overlong == Overlong::Truncate) {
        ++u.truncated;
        u.units.push_back({start, T + 1});
      } else {
        ++u.dropped;
      }
    };
    std::vector<int32_t> f;
    int64_t begin = 0;
    for (int64_t off = 0; off < N; off += kFlagChunk) {
      const int64_t n = std::min(kFlagChunk, N - off);
      f.resize(static_cast<size_t>(n));
      sample_flags->read(off, n, f.data());
      for (int64_t i = 0; i < n; ++i)
        if ((f[static_cast<size_t>(i)] & kFlagSampleStart) && off + i > begin) {
          add(begin, off + i);
          begin = off + i;
        }
    }
    if (N > begin) add(begin, N);
  }
  if (u.units.empty())
    user_error("token shard '{}' ({} tokens) has no {} to train on with data.seq_len {}{}",
               shard.path(), N, u.samples ? "sample" : "window of seq_len + 1 tokens", T,
               u.dropped > 0 ? fmt::format(" ({} samples longer than seq_len + 1 = {} tokens "
                                           "were dropped; set data.overlong: truncate or a "
                                           "larger data.seq_len)",
                                           u.dropped, T + 1)
                             : std::string());
  return u;
}

std::vector<int64_t> epoch_order(uint64_t seed, int64_t epoch, int64_t n) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  // Fisher-Yates: position i swaps with j uniform in [0, i], j from counter_hash so the
  // order is a function of (seed, epoch) alone. The constant keeps these streams apart from
  // the window sampler's (step, micro, row) ones.
  constexpr uint64_t kEpochStream = 0x65706f6368ull;  // "epoch"
  for (int64_t i = n - 1; i > 0; --i) {
    const uint64_t h = counter_hash(seed, kEpochStream, static_cast<uint64_t>(epoch),
                                    static_cast<uint64_t>(i));
    const auto j = static_cast<int64_t>(
        (static_cast<unsigned __int128>(h) * static_cast<uint64_t>(i + 1)) >> 64);
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

EpochStream::EpochStream(EpochUnits units, const DataConfig& cfg, bool shuffle)
    : units_(std::move(units)),
      seed_(cfg.seed),
      seq_len_(cfg.seq_len),
      epochs_(cfg.epochs),
      packed_(units_.samples && cfg.packing),
      shuffle_(shuffle) {
  epoch_offsets_.push_back(0);
}

const EpochStream::Plan& EpochStream::plan(int64_t e) {
  if (auto it = plans_.find(e); it != plans_.end()) return it->second;
  if (plans_.size() >= 2) plans_.erase(plans_.begin());  // keep the neighbours of a boundary
  Plan p;
  const auto n = static_cast<int64_t>(units_.units.size());
  if (shuffle_) {
    p.order = epoch_order(seed_, e, n);
  } else {
    p.order.resize(static_cast<size_t>(n));
    std::iota(p.order.begin(), p.order.end(), int64_t{0});
  }
  // Greedy packing: a unit of n tokens takes n - 1 input positions (its last token is only a
  // target, so no target is the next sample's first token).
  int64_t used = seq_len_;  // forces a new sequence at the first unit
  for (size_t i = 0; i < p.order.size(); ++i) {
    const int64_t need = units_.units[static_cast<size_t>(p.order[i])].length - 1;
    if (!packed_ || used + need > seq_len_) {
      p.seq_begin.push_back(static_cast<int64_t>(i));
      used = 0;
    }
    used += need;
  }
  p.seq_begin.push_back(static_cast<int64_t>(p.order.size()));
  return plans_.emplace(e, std::move(p)).first->second;
}

int64_t EpochStream::sequences_in_epoch(int64_t e) {
  return static_cast<int64_t>(plan(e).seq_begin.size()) - 1;
}

std::pair<int64_t, int64_t> EpochStream::locate(int64_t g) {
  BRAID_CHECK(g >= 0, "sequence {}", g);
  // Epochs are found in order; their sizes are cached (only packing makes them differ).
  auto e = static_cast<int64_t>(
      std::upper_bound(epoch_offsets_.begin(), epoch_offsets_.end(), g) - epoch_offsets_.begin() -
      1);
  for (;;) {
    const int64_t base = epoch_offsets_[static_cast<size_t>(e)];
    if (static_cast<size_t>(e) + 1 == epoch_offsets_.size())
      epoch_offsets_.push_back(base + sequences_in_epoch(e));
    if (g < epoch_offsets_[static_cast<size_t>(e) + 1]) return {e, g - base};
    ++e;
  }
}

int64_t EpochStream::total_sequences() {
  BRAID_CHECK(epochs_ > 0, "total_sequences without data.epochs");
  if (epoch_offsets_.size() <= static_cast<size_t>(epochs_)) {
    (void)locate(0);
    while (epoch_offsets_.size() <= static_cast<size_t>(epochs_))
      (void)locate(epoch_offsets_.back());
  }
  return epoch_offsets_[static_cast<size_t>(epochs_)];
}

void EpochStream::fill_row(const TokenShard& shard, const TokenShard* loss_flags, int64_t g,
                           int32_t* tokens, int32_t* targets, int32_t* starts) {
  const int64_t T = seq_len_;
  std::fill(tokens, tokens + T, 0);
  std::fill(targets, targets + T, -1);
  int64_t pos = 0;
  const auto [e, k] = locate(g);
  if (epochs_ <= 0 || e < epochs_) {
    const Plan& p = plan(e);
    std::vector<int32_t> w, f;
    for (int64_t i = p.seq_begin[static_cast<size_t>(k)];
         i < p.seq_begin[static_cast<size_t>(k) + 1]; ++i) {
      const DataUnit& u = units_.units[static_cast<size_t>(p.order[static_cast<size_t>(i)])];
      const int64_t n = u.length;
      w.resize(static_cast<size_t>(n));
      shard.read(u.start, n, w.data());
      std::copy(w.begin(), w.end() - 1, tokens + pos);
      std::copy(w.begin() + 1, w.end(), targets + pos);
      if (loss_flags) apply_loss_mask(*loss_flags, u.start, static_cast<int>(n - 1), targets + pos);
      if (starts) std::fill(starts + pos, starts + pos + n - 1, static_cast<int32_t>(pos));
      pos += n - 1;
    }
  }
  // Padding (the rest of a packed row, or a whole row past the last epoch) is one more span.
  if (starts && pos < T) std::fill(starts + pos, starts + T, static_cast<int32_t>(pos));
}

}  // namespace braid
