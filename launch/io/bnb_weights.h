// Weights a Hugging Face checkpoint holds quantised by bitsandbytes (transformers'
// BitsAndBytesConfig(load_in_4bit=True), saved): each such linear's `weight` is u8 NF4 codes,
// two a byte, beside its Linear4bit quant state (`weight.absmax`, `weight.quant_map`, with
// double quantisation `weight.nested_absmax` and `weight.nested_quant_map`, and
// `weight.quant_state.bitsandbytes__nf4`: the JSON of quant_type, blocksize, dtype, shape and
// the nested fields). They are read back as bitsandbytes' dequantize_4bit computes them.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/context.h"
#include "launch/io/hf_weights.h"

namespace braid {

// The tensors of a checkpoint as the importer sees them: every plain tensor, and each
// quantised weight under its own name with the shape its quant state gives; the state tensors
// themselves left out. `quantised` lists the weights read through read_bnb_weight.
struct BnbTensorView {
  std::vector<std::pair<std::string, Shape>> tensors;
  std::map<std::string, Shape> quantised;
};
// UserError naming the tensor and field for what braid does not read: a quant type other than
// nf4 (fp4), bitsandbytes' 8-bit (LLM.int8) weights, a malformed or incomplete quant state.
BnbTensorView bnb_tensor_view(HfWeights& w);

// The f32 values of quantised weight `name` (OUT, IN): bitsandbytes' dequantize_4bit (the
// absmax values read back through the nested map plus the offset, then code * absmax; rounded
// through the state's dtype when it is bfloat16 or float16). UserError when its quant_map is
// not the NF4 table or its nested_quant_map not the signed dynamic map braid knows.
Tensor read_bnb_weight(ExecContext& ctx, HfWeights& w, const std::string& name);

}  // namespace braid
