// Key/value cache for incremental decoding (one sequence).
#pragma once

#include <vector>

#include "core/context.h"

namespace braid {

struct KVCache {
  struct Layer {
    Tensor k;  // (max_len, Hkv, D)
    Tensor v;  // (max_len, Hkv, D)
  };
  std::vector<Layer> layers;  // indexed by absolute layer; only a stage's own layers are allocated
  int64_t max_len = 0;
  int64_t len = 0;  // positions filled so far

  KVCache(ExecContext& ctx, int n_layer, int first, int last, int64_t max_len_, int64_t kv_heads,
          int64_t head_dim, DType dtype = DType::F32)
      : layers(static_cast<size_t>(n_layer)), max_len(max_len_) {
    // dtype: the model's activation storage (bf16/f16 under mixed precision).
    for (int i = first; i < last; ++i)
      layers[i] = {ctx.zeros({max_len_, kv_heads, head_dim}, dtype),
                   ctx.zeros({max_len_, kv_heads, head_dim}, dtype)};
  }
};

}  // namespace braid
