// Loading and saving a Transformer's weights: braid checkpoints, run directories and HF
// export directories, with shape checks that say what does not match.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/models/lora_config.h"
#include "core/models/transformer.h"
#include "core/safetensors.h"
#include "launch/io/checkpoint_tensors.h"

namespace braid {

// (name, value) of every parameter this model owns, in model order (replicas, such as a last
// pipeline stage's copy of a tied embedding, are not saved).
std::vector<std::pair<std::string, Tensor>> named_weights(const Transformer& model);

std::vector<std::pair<std::string, Tensor>> named_weights(const std::vector<Parameter*>& params);

// Copies every parameter from a checkpoint's whole tensors (braid names); the parameters hold
// whole values (before a tensor-parallel pass). Throws UserError when a tensor is missing or
// has another shape ("written for a different model config").
void load_weights(const std::vector<Parameter*>& params, const CheckpointTensors& tensors);
void load_weights(Transformer& model, const CheckpointTensors& tensors);

// A model ready for evaluation or sampling, and where it came from.
struct LoadedModel {
  std::unique_ptr<ExecContext> ctx;  // the context the model was built on
  std::unique_ptr<Transformer> model;
  std::string source;     // the checkpoint or HF directory actually read
  std::string tokenizer;  // tokenizer file next to it, "" when none was found
  std::string run_dir;    // the braid run directory it belongs to, "" for HF directories
  int64_t step = 0;       // training step of a braid checkpoint (0 for HF files)
  // The LoRA adapters the checkpoint holds (a LoRA run's): how many wrapped Linears, their
  // rank and scale, and whether they were folded into the weights.
  int adapter_modules = 0;
  int adapter_rank = 0;
  float adapter_scale = 0.0f;
  bool adapter_applied = false;
  // One line for the user: which weights are in use ("LoRA adapter applied: ...", "base model
  // only: ...", or "" when the checkpoint has no adapter).
  std::string adapter_note() const;
};

// `path` may be a braid checkpoint directory (manifest.json), a run directory (uses its
// checkpoints/latest), or an HF directory with config.json and model.safetensors or a sharded
// index (a model.safetensors or index file names its directory). The model's size is checked
// against memory before anything is allocated. The model is built on `device` (its own
// context: a GPU's stream and allocator for cuda). A LoRA run's checkpoint holds the base and
// the adapters: with apply_adapter the adapters (scaled as the run's lora section says) are
// folded into the base weights, W += scale B A, so the model computes what training did;
// otherwise only the base is read. `weights`: the element type the model's weights are kept in
// (f32, bf16 or f16; its activations follow): other than f32 on the CPU, the model is read and
// folded in f32 in host memory, then each tensor is converted and moved to `device` in turn, so
// the device never holds more than the converted model (an 8B model in bf16 is 16 GB where
// f32 needs 32).
LoadedModel load_model(const std::string& path, Device device = Device::cpu(),
                       bool apply_adapter = false, DType weights = DType::F32);

// The weights' element type for `braid eval` / `braid generate` --dtype: auto is bf16 on a GPU
// (f32 there would be twice the memory and run the GEMMs in true f32) and f32 on the CPU;
// fp32, bf16 and fp16 as named. `flag` names the option in the error for any other value.
DType inference_dtype(const std::string& value, Device device, const char* flag);

// QLoRA (lora.base_quant with lora.init_from): checkpoints keep the quantised base by
// reference, not as tensors. The record a checkpoint manifest stores ("quantised_base"):
// {"init_from": the directory, "files": [{"name", "bytes", "checksum"}]} for its model*.safetensors
// files (checksum braid-mix64-v1, core/checksum.h); null for any other run.
nlohmann::json quantised_base_record(const LoraConfig& lora);
// Throws UserError naming `what` (the checkpoint) and the file when a recorded base file is
// missing or its bytes changed: the run's adapters were trained on that base.
void check_quantised_base(const nlohmann::json& recorded, const std::string& what);

// The model config stored at `path` (same kinds of path as load_model), without reading
// weights: what `run.init_from` takes the model shape from.
ModelConfig model_config_at(const std::string& path);

// Tensors by name with their whole shapes, and what receives each as it is read (an f32 host
// tensor, valid only during the call).
using WantedTensors = std::map<std::string, Shape>;
using TensorSink = std::function<void(const std::string& name, const Tensor& whole)>;

// Reads the `wanted` tensors of the model at `path` (same kinds of path as load_model) one at a
// time, widened to f32 in braid's layout (HF files transposed and dequantised as load_model
// reads them), and hands each to `sink`: a caller can place, split or quantise each tensor
// before the next is read. Throws UserError naming the file and tensor when one is missing or
// has another shape.
void stream_model_weights(const std::string& path, const WantedTensors& wanted,
                          const TensorSink& sink);

// Overwrites model's weights with those at `path` (same kinds of path as load_model); the
// shapes must match model's config. The start of a fine-tuning run (`run.init_from`).
void init_weights_from(Transformer& model, const std::string& path);

// The tokenizer file of a run or data directory: braid_tokenizer.json, or tokenizer.json as
// written by older braid versions (and by Hugging Face). "" when there is none.
std::string tokenizer_file_in(const std::string& dir);

// The tokenizer file of the model at `path` (same kinds of path as load_model), "" for none.
std::string model_tokenizer_file(const std::string& path);

}  // namespace braid
