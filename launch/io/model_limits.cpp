// Model dimension limits and the memory check.
#include "launch/io/model_limits.h"

#include <unistd.h>

#include <algorithm>
#include <string>

#include "core/config_fields.h"

namespace braid {

uint64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}

namespace {

void check_dim(const char* key, int64_t v, int64_t max) {
  if (v > max) config_error(key, "{} is {}; braid supports at most {}", key, v, max);
}

double gib(double bytes) { return bytes / (1024.0 * 1024.0 * 1024.0); }

}  // namespace

void check_model_fits(const ModelConfig& c, int bytes_per_param) {
  check_dim("vocab_size", c.vocab_size, kMaxModelDim);
  check_dim("n_embd", c.n_embd, kMaxModelDim);
  check_dim("context_length", c.context_length, kMaxModelDim);
  check_dim("ffn_hidden", c.ffn_hidden, kMaxModelDim);
  check_dim("n_layer", c.n_layer, kMaxLayers);
  // With every dimension <= 2^24 these products fit easily in 64 bits.
  const int64_t C = c.n_embd, F = c.ffn(), kv = int64_t{c.kv_heads()} * c.head_dim();
  struct Part {
    const char* key;
    const char* what;
    int64_t params;
  };
  const int64_t block = c.is_llama() ? 2 * C * C + 2 * C * kv + 3 * C * F : 4 * C * C + 2 * C * F;
  const Part parts[] = {
      {"vocab_size", "the token embedding and LM head",
       int64_t{c.vocab_size} * C * (c.tied() ? 1 : 2)},
      {"context_length", "the position embedding",
       c.is_llama() ? 0 : int64_t{c.context_length} * C},
      {"n_layer", "the blocks", int64_t{c.n_layer} * block},
  };
  int64_t total = 0;
  const Part* largest = &parts[0];
  for (const Part& p : parts) {
    total += p.params;
    if (p.params > largest->params) largest = &p;
  }
  const uint64_t mem = physical_memory_bytes();
  const double need = static_cast<double>(total) * bytes_per_param;
  if (mem > 0 && need > static_cast<double>(mem))
    config_error(largest->key,
                 "{} is {}: the model has {:.3g} G parameters ({} alone {:.3g} G) and needs about "
                 "{:.1f} GiB ({} bytes per parameter) but this machine has {:.1f} GiB of memory",
                 largest->key,
                 std::string(largest->key) == "vocab_size"       ? c.vocab_size
                 : std::string(largest->key) == "context_length" ? c.context_length
                                                                 : c.n_layer,
                 total / 1e9, largest->what, largest->params / 1e9, gib(need), bytes_per_param,
                 gib(static_cast<double>(mem)));
}

}  // namespace braid
