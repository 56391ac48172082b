// Serving estimate: weights and KV cache per GPU, and the decode rate memory bandwidth allows.
#pragma once

#include <cstdint>
#include <string>

#include "core/model_config.h"
#include "launch/plan/plan_types.h"

namespace braid::plan {

// KV cache bytes for `batch` sequences of `context` tokens: 2 (K and V) * layers * kv_heads *
// head_dim * context * batch * bytes per element.
double kv_cache_bytes(const ModelConfig& m, int64_t context, int64_t batch, double elem_bytes);

// Bytes per weight for a serving dtype: fp16/bf16 2, int8 1, int4 0.5 (+ one fp16 scale per
// 128 weights for the quantised ones).
double serving_weight_bytes(const std::string& dtype);

// Memory and decode bound with the model split over `tp` GPUs. Each decode step reads every
// weight and the whole KV cache once (memory bound) unless the FLOPs take longer.
InferenceResult predict_inference(const ModelConfig& m, const GpuSpec& gpu, int tp,
                                  const std::string& weight_dtype, int64_t context, int64_t batch);

}  // namespace braid::plan
