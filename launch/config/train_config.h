// TrainConfig (the trainer loop) and RunConfig (the whole YAML file).
#pragma once

#include <string>

#include "core/checkpointing_mode.h"
#include "core/config_fields.h"
#include "core/model_config.h"
#include "core/models/lora_config.h"
#include "core/device_choice.h"
#include "core/precision.h"
#include "data/data_config.h"
#include "launch/config/checkpoint_config.h"
#include "optim/loss_scaler.h"
#include "optim/optim_config.h"
#include "parallel/parallel_config.h"

namespace braid {

struct TrainConfig {
  int steps = 1000;
  int log_interval = 10;
  int eval_interval = 100;
  int eval_batches = 8;
  double peak_tflops = 0.0;
  int threads = 0;
  int sample_tokens = 200;
  std::string sample_prompt = "";
  float sample_temperature = 0.8f;
  int sample_top_k = 40;
  Checkpointing checkpointing = Checkpointing::None;
  int checkpoint_every_n_layers = 1;
  Precision precision = Precision::FP32;
  LossScaleConfig loss_scale;  // fp16 only
  DeviceChoice device = DeviceChoice::Auto;
  bool tf32 = false;
  bool deterministic = true;

  template <class V>
  void visit(V& v) {
    v("steps", steps, "Optimizer steps to train for.");
    v("log_interval", log_interval, "Print and record metrics every this many steps.");
    v("eval_interval", eval_interval, "Validation loss every this many steps (and at the end); 0 disables.");
    v("eval_batches", eval_batches, "Micro-batches of validation data per evaluation.");
    v("peak_tflops", peak_tflops, "Peak TFLOP/s used for MFU; 0 uses this machine's f32 GEMM rate, measured once (best of 2 s) and cached in ~/.cache/braid/peak.json (measured again after a run whose MFU passed 100 %: docs/runs.md).");
    v("threads", threads, "OpenMP threads; 0 uses OMP_NUM_THREADS or all cores.");
    v("sample_tokens", sample_tokens, "Tokens generated from the trained model at the end of training (0: none).");
    v("sample_prompt", sample_prompt, "Prompt of the sample at the end of training.");
    v("sample_temperature", sample_temperature, "Sampling temperature of the sample at the end.");
    v("sample_top_k", sample_top_k, "Top-k of the sample at the end (0: whole vocabulary).");
    v("checkpointing", checkpointing, "Activation checkpointing: none; full (keep only each wrapped block's input, recompute the block in backward); selective (rebuild the norm and activation-function outputs in backward instead of keeping them; no GEMM is recomputed).");
    v("checkpoint_every_n_layers", checkpoint_every_n_layers, "With checkpointing: full, wrap every n-th block (layers 0, n, 2n, ...).");
    v("precision", precision,
      "The storage of weights and activations for compute (arithmetic inside "
      "kernels, gradients and the optimizer's master weights of trainable parameters stay fp32; "
      "frozen ones are converted once and keep no master; fp16 adds dynamic loss scaling).");
    loss_scale.visit(v);
    v("device", device,
      "Where the run computes: auto (a GPU when this binary has the CUDA backend and a GPU is "
      "visible, unless the run needs an op without a CUDA kernel yet, such as a quantised "
      "LoRA base; else the CPU; the log's first line says which and why), cpu, or cuda (an "
      "error when there is no GPU or no CUDA backend).");
    v("tf32", tf32,
      "On a GPU, let fp32 GEMMs use TF32 tensor cores (10-bit mantissa inputs, fp32 "
      "accumulation): faster, not bit-comparable with the CPU. Ignored on the CPU.");
    v("deterministic", deterministic,
      "On a GPU, run cuDNN's attention backward in its deterministic order, so two runs of a "
      "config, and a resumed run, give the same losses bit for bit (every other GPU kernel of "
      "braid is deterministic anyway); false lets cuDNN add its gradient parts in any order "
      "(it may be faster and need less workspace; unmeasured), at the cost of the last bits. Ignored on the CPU, "
      "which is always deterministic.");
  }
  void validate() const {
    if (steps < 1) config_error("steps", "steps is {}; expected >= 1", steps);
    if (log_interval < 1) config_error("log_interval", "log_interval is {}; expected >= 1", log_interval);
    if (eval_interval < 0) config_error("eval_interval", "eval_interval is {}; expected >= 0", eval_interval);
    if (eval_batches < 1) config_error("eval_batches", "eval_batches is {}; expected >= 1", eval_batches);
    if (peak_tflops < 0) config_error("peak_tflops", "peak_tflops is {}; expected >= 0", peak_tflops);
    if (threads < 0) config_error("threads", "threads is {}; expected >= 0", threads);
    if (sample_tokens < 0) config_error("sample_tokens", "sample_tokens is {}; expected >= 0", sample_tokens);
    if (!(sample_temperature >= 0.0f)) config_error("sample_temperature", "sample_temperature is {}; expected >= 0", sample_temperature);
    if (sample_top_k < 0) config_error("sample_top_k", "sample_top_k is {}; expected >= 0", sample_top_k);
    if (checkpoint_every_n_layers < 1)
      config_error("checkpoint_every_n_layers", "checkpoint_every_n_layers is {}; expected >= 1", checkpoint_every_n_layers);
    loss_scale.validate();
  }
};

// Run-level settings: where the run lives.
struct RunSection {
  std::string name = "run";
  std::string dir = "runs";
  std::string init_from = "";

  template <class V>
  void visit(V& v) {
    v("name", name, "Run name; the run directory is `<dir>/<name>`.");
    v("dir", dir, "Parent directory of run directories. Relative paths are relative to the working directory.");
    v("init_from", init_from, "Start from the weights of this run directory, checkpoint or Hugging Face directory (fine-tuning); the model section is taken from it, so model keys need not be restated. Relative paths are relative to the config file. Ignored when resuming.");
  }
  void validate() const {
    if (name.empty() || name.find('/') != std::string::npos)
      config_error("name", "name is '{}'; expected a non-empty name without '/'", name);
  }
};

// The whole YAML file: one section per component, each owned by that component.
struct RunConfig {
  RunSection run;
  ModelConfig model;
  DataConfig data;
  OptimConfig optim;
  TrainConfig train;
  CheckpointConfig checkpoint;
  LoraConfig lora;
  ParallelConfig parallel;

  // Calls v.section(name, struct) for each section, in file order.
  template <class V>
  void visit_sections(V& v) {
    v.section("run", run);
    v.section("model", model);
    v.section("data", data);
    v.section("optim", optim);
    v.section("train", train);
    v.section("checkpoint", checkpoint);
    v.section("lora", lora);
    v.section("parallel", parallel);
  }
};

}  // namespace braid
