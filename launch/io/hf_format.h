// Conversion between braid parameters and Hugging Face config.json / safetensors for the
// gpt2 and llama families, independent of the model code.
//
// braid's parameter names are the HF names. braid stores every linear weight as (out, in)
// like torch.nn.Linear; HF GPT-2 uses Conv1D, (in, out), so the four GPT-2 linear weights
// (attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj) are transposed both ways. Llama tensors
// are stored as they are. Dtypes are kept as they are (no conversion here).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/model_config.h"
#include "core/tensor.h"
#include "launch/io/hf_weights.h"

namespace braid {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// The HF config.json for this model (gpt2: GPT2LMHeadModel; llama: LlamaForCausalLM).
nlohmann::json hf_config_json(const ModelConfig& cfg);

// A float config value as the double that prints like it: the shortest decimal that reads back
// as `f` (0.1f is written 0.1, not 0.100000001; 1e-5f as 1e-05, not 9.99999974e-06).
double json_float(float f);

// The ModelConfig an HF config.json describes. Fields left at their family default are
// written as braid's "default" values (ffn_hidden 0, n_kv_head 0, tie_embeddings auto).
// Unsupported model types, missing keys and unsupported options (rope_scaling, biases in
// llama, ...) throw braid::UserError naming `path_for_errors` and the key.
ModelConfig model_config_from_hf(const nlohmann::json& hf, const std::string& path_for_errors);

// braid's parameters for `cfg`, in canonical order, with braid (out, in) shapes. The LM head
// appears only when untied.
std::vector<std::pair<std::string, Shape>> parameter_shapes(const ModelConfig& cfg);

// True for the GPT-2 Conv1D weights that are stored transposed in HF files.
bool hf_transposed(const ModelConfig& cfg, const std::string& name);

// braid parameters -> tensors for an HF file, in the given order. Every parameter of `cfg`
// must be present with its shape (braid::Error otherwise: that is a programming mistake).
// Transposed tensors are new; the others share storage with `params`. A tied model's
// lm_head.weight is not written.
NamedTensors to_hf_tensors(const ModelConfig& cfg, const NamedTensors& params);

// Where one braid parameter comes from in HF files.
struct HfTensorSource {
  std::string param;      // braid name
  std::string file_name;  // the tensor's name in the file (maybe without the base prefix)
  bool transposed = false;
};

struct HfImportPlan {
  std::vector<HfTensorSource> params;  // every parameter of the config, canonical order
  std::string tied_head;  // an lm_head.weight in the files of a tied config ("" when none)
};

// Matches the tensors of HF files (names and shapes, from headers only) to the parameters of
// `cfg`, with the same rules and errors as from_hf_tensors; the caller then reads one tensor at
// a time. `tied_head`, when set, must equal the token embedding (the caller checks the bytes).
HfImportPlan plan_hf_import(const ModelConfig& cfg,
                            const std::vector<std::pair<std::string, Shape>>& file_tensors,
                            const std::string& path_for_errors);

// The braid value of the file tensor `t` that `src` names (a new tensor when transposed).
Tensor hf_tensor_to_braid(const HfTensorSource& src, const Tensor& t);

// The same as to_hf_tensors, made on demand for save_hf_weights: each tensor is transposed
// and converted to `dtype` only when its shard is written.
std::vector<HfTensorOut> hf_tensors_out(const ModelConfig& cfg, const NamedTensors& params,
                                        DType dtype);

// Tensors read from an HF file -> braid parameters in canonical order. Accepts names without
// the base-model prefix ("h.0.attn.c_attn.weight" as saved by GPT2Model), skips non-parameter
// buffers (gpt2 attn.bias / attn.masked_bias, llama rotary_emb.inv_freq) and, for a tied
// model, an lm_head.weight equal to the token embedding. Missing, unknown, duplicated or
// mis-shaped tensors throw braid::UserError naming `path_for_errors`.
NamedTensors from_hf_tensors(const ModelConfig& cfg, const NamedTensors& hf,
                             const std::string& path_for_errors);

}  // namespace braid
