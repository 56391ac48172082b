// Key/value cache for incremental decoding (one sequence).
#pragma once

#include <vector>

#include "core/tensor.h"

namespace braid {

struct KVCache {
  struct Layer {
    Tensor k;  // (max_len, Hkv, D)
    Tensor v;  // (max_len, Hkv, D)
  };
  std::vector<Layer> layers;
  int64_t max_len = 0;
  int64_t len = 0;  // positions filled so far

  KVCache(int n_layer, int64_t max_len_, int64_t kv_heads, int64_t head_dim) : max_len(max_len_) {
    for (int i = 0; i < n_layer; ++i)
      layers.push_back({Tensor::zeros({max_len_, kv_heads, head_dim}),
                        Tensor::zeros({max_len_, kv_heads, head_dim})});
  }
};

}  // namespace braid
