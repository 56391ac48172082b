// What `braid plan --calibrate` measures and for how long: plain values, so the planner can
// describe a calibration without including the calibrator (launch/calibrate/).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "launch/plan/plan_types.h"

namespace braid::plan {

struct CalibrateOptions {
  // Where to measure: cpu, cuda or cuda:N (parse_calibrate_device, launch/plan/gpu_profile.h).
  std::string device = "cpu";
  int gemm_size = 1024;            // square GEMM edge (the peak used for MFU)
  size_t copy_bytes = 256u << 20;  // buffer of the stream-like copy
  // The whole calibration (setup, one warm-up call per probe, the timed rounds) ends within
  // total_seconds of its start; the timed part is split evenly over the probes and `rounds`
  // interleaved rounds (each round visits every probe once). Rounds are dropped when one call
  // of every probe per round does not fit; one round always runs, so a budget below that floor
  // takes the floor (CalibrationRun says so).
  int rounds = 6;
  double total_seconds = 40;
  // Training-like kernels on a micro-batch of `tokens` tokens.
  int tokens = 2048;
  // n_embd of the one-block probes (GPT-2 and Llama): GEMM and block element-wise rates
  std::vector<int> gemm_widths = {128, 256, 512, 768};
  std::vector<int> gemm_token_counts = {512, 1024, 2048,
                                        4096};  // GPT-2 block probes at gemm_tokens_width
  int gemm_tokens_width = 512;
  int attention_seq = 256;    // the head_dim tables' sequence length
  int attention_width = 512;  // and their n_embd (heads = n_embd / head_dim)
  std::vector<int> head_dims = {32, 64, 128};
  // Side tables at head_dim attention_sides_head_dim: by sequence length, and by n_embd (the
  // number of heads changes the row stride of q, k, v and with it the cache behaviour).
  std::vector<int> attention_seqs = {128, 256, 512, 1024};
  std::vector<int> attention_widths = {128, 256, 512, 1024};
  int attention_sides_head_dim = 64;
  std::vector<int> lm_head_widths = {128, 256, 512};  // LM head + CE at vocab lm_head_ref_vocab
  int lm_head_ref_vocab = 4096;
  std::vector<int> lm_head_vocabs = {512, 2048, 4096, 16384};  // at n_embd lm_head_vocabs_width
  int lm_head_vocabs_width = 256;
  // Optimizer passes (norm, clipping, AdamW) over this many parameters in 48 matrices.
  std::vector<int64_t> optimizer_params = {1 << 20, 1 << 22, 1 << 24};

  // The shapes for a GPU `device`: the CPU's are too small to leave a GPU's launch costs behind
  // (a 1024^3 GEMM takes microseconds on an H100), so the same probes run at larger widths,
  // token counts, sequences and vocabularies.
  static CalibrateOptions gpu(std::string device) {
    CalibrateOptions o;
    o.device = std::move(device);
    o.gemm_size = 8192;
    o.copy_bytes = size_t{1} << 30;
    o.total_seconds = 20;
    o.tokens = 8192;
    o.gemm_widths = {512, 1024, 2048, 4096};
    o.gemm_token_counts = {2048, 4096, 8192, 16384};
    o.gemm_tokens_width = 1024;
    o.attention_seq = 1024;
    o.attention_width = 2048;
    o.attention_seqs = {512, 1024, 2048, 4096};
    o.attention_widths = {512, 1024, 2048, 4096};
    o.lm_head_widths = {512, 1024, 2048};
    o.lm_head_ref_vocab = 32768;
    o.lm_head_vocabs = {8192, 32768, 131072};
    o.lm_head_vocabs_width = 1024;
    o.optimizer_params = {int64_t{1} << 22, int64_t{1} << 24, int64_t{1} << 26};
    return o;
  }
};

// How a calibration went: rounds run, the wall time, and the shortest calibration this machine
// allows (setup + warm-up + one timed call of every probe).
struct CalibrationRun {
  DeviceProfile profile;
  int rounds = 0;
  double elapsed_s = 0;
  double floor_s = 0;
};

// The calibrator `braid plan --calibrate` calls; main() passes launch/calibrate's, so the
// planner itself runs no kernels.
using Calibrator = std::function<CalibrationRun(const CalibrateOptions&)>;

}  // namespace braid::plan
