// Serving memory and decode-rate bound.
#include "launch/plan/inference.h"

#include <algorithm>

#include "core/error.h"
#include "launch/plan/gpu_table.h"

namespace braid::plan {

double kv_cache_bytes(const ModelConfig& m, int64_t context, int64_t batch, double elem_bytes) {
  return 2.0 * m.n_layer * m.kv_heads() * m.head_dim() * static_cast<double>(context) *
         static_cast<double>(batch) * elem_bytes;
}

double serving_weight_bytes(const std::string& dtype) {
  if (dtype == "fp16" || dtype == "bf16") return 2.0;
  if (dtype == "int8") return 1.0 + 2.0 / 128;
  if (dtype == "int4") return 0.5 + 2.0 / 128;
  user_error("serving dtype '{}' is unknown; expected fp16, bf16, int8 or int4", dtype);
}

InferenceResult predict_inference(const ModelConfig& m, const GpuSpec& gpu, int tp,
                                  const std::string& weight_dtype, int64_t context, int64_t batch) {
  if (tp < 1 || m.kv_heads() % tp != 0)
    user_error("--tp {} must be >= 1 and divide the kv heads ({})", tp, m.kv_heads());
  if (context < 1 || batch < 1) user_error("context {} and batch {} must be >= 1", context, batch);
  InferenceResult r;
  r.weight_dtype = weight_dtype;
  r.tp = tp;
  r.weight_bytes = static_cast<double>(m.num_params()) * serving_weight_bytes(weight_dtype) / tp;
  r.kv_bytes = kv_cache_bytes(m, context, batch, 2.0) / tp;
  r.overhead_bytes = gpu.overhead_gib * kGiB;
  r.capacity_bytes = gpu.memory_gib * kGiB;
  r.fits = r.weight_bytes + r.kv_bytes + r.overhead_bytes <= r.capacity_bytes;
  const double mem_s = (r.weight_bytes + r.kv_bytes) / (gpu.mem_bw_gbs * 1e9);
  const double peak = (gpu.tflops_fp16 > 0 ? gpu.tflops_fp16 : gpu.tflops_fp32) * 1e12;
  const double flop_s = 2.0 * static_cast<double>(m.num_matmul_params()) * batch / tp /
                        (peak * gpu.matmul_efficiency);
  r.memory_bound = mem_s >= flop_s;
  r.decode_step_s = std::max(mem_s, flop_s);
  r.tokens_per_s_per_seq = 1.0 / r.decode_step_s;
  r.tokens_per_s = static_cast<double>(batch) / r.decode_step_s;
  r.context = context;
  r.model_context = m.context_length;
  r.context_exceeds_model = context > m.context_length;
  if (!r.fits) {
    // The least tensor-parallel degree (a power of two dividing the KV heads) at which weights
    // and KV cache fit, each GPU keeping its own runtime overhead.
    for (int t = tp * 2; t <= 64 && m.kv_heads() % t == 0; t *= 2) {
      const double need =
          static_cast<double>(m.num_params()) * serving_weight_bytes(weight_dtype) / t +
          kv_cache_bytes(m, context, batch, 2.0) / t + r.overhead_bytes;
      if (need <= r.capacity_bytes) {
        r.smallest_fitting_tp = t;
        break;
      }
    }
  }
  return r;
}

}  // namespace braid::plan
