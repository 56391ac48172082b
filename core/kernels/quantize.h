// Block-wise absmax quantisation (QLoRA's NF4, symmetric int8, and the 8-bit dynamic maps of
// Dettmers et al. 2022) and its inverse, bit-compatible with bitsandbytes' CPU path.
//
// A flat array of n values is cut into blocks of `block` values (the last one may be shorter);
// each block keeps absmax = max |x| (f32) and every value the index of the code nearest to
// x / absmax. NF4 packs two 4-bit codes per byte (element 2i in the high nibble of byte i, as
// bitsandbytes); the 8-bit codes take a byte each. A value reads back as code[q] * absmax.
#pragma once

#include <cstdint>

#include "core/context.h"

namespace braid {

enum class QuantCode : uint8_t {
  Nf4,              // 16 NF4 values, 4 bits
  Int8,             // q / 127, q in [-127, 127], 8 bits
  Dynamic,          // bitsandbytes' signed dynamic map, 8 bits
  DynamicUnsigned,  // its unsigned map (values >= 0), 8 bits
};

// Bytes of the codes of n values (NF4: ceil(n / 2)); blocks of n values.
int64_t quant_code_bytes(QuantCode code, int64_t n);
inline int64_t quant_blocks(int64_t n, int64_t block) { return (n + block - 1) / block; }
// The 256 values of a dynamic map (the 16 of NF4, 256 of int8 by byte) as an f32 tensor.
Tensor quant_code_table(QuantCode code);

// x: n values (f32 or bf16, contiguous, any shape); q: u8 (quant_code_bytes); absmax: f32
// (quant_blocks(n, block)). Overwrites q and absmax.
void quantize_blockwise(ExecContext& ctx, Tensor& q, Tensor& absmax, const Tensor& x,
                        QuantCode code, int64_t block);
// y (f32 or bf16, n values) = code[q] * absmax for the values [begin, begin + y.numel()) of the
// quantised array (a tile of rows of a weight: the block of value i is i / block). A non-zero
// `offset` is then added in f32 (the product and the sum rounded once each): double
// quantisation's absmax values are read back that way, on the tensor's device.
void dequantize_blockwise(ExecContext& ctx, Tensor& y, const Tensor& q, const Tensor& absmax,
                          QuantCode code, int64_t block, int64_t begin = 0, float offset = 0.0f);

// A weight stored only quantised, with QLoRA's double quantisation of its absmax values: the
// absmax values, less their mean `offset`, are quantised again with the signed dynamic map in
// blocks of 256 (bitsandbytes' compress_statistics).
struct QuantizedWeight {
  QuantCode code = QuantCode::Nf4;
  int64_t block = 64;
  Shape shape;    // the weight's shape
  Tensor q;       // u8: the codes
  Tensor absmax;  // f32 (blocks): single quantisation, or the absmax read back from the nested
  Tensor nested;  // u8 (blocks): double quantisation's codes, undefined without it
  Tensor nested_absmax;  // f32 (ceil(blocks / 256))
  float offset = 0.0f;

  bool defined() const { return q.defined(); }
  int64_t numel() const;
  // Bytes held: codes, (nested) absmax values and constants.
  int64_t bytes() const;
};

constexpr int64_t kNestedBlock = 256;

// Quantises w (f32 or bf16) into tensors allocated on ctx (MemCategory::Weights). With
// double_quant the f32 absmax values are not kept: `absmax` is left undefined and the tiles read
// them through the nested codes.
QuantizedWeight quantize_weight(ExecContext& ctx, const Tensor& w, QuantCode code, int64_t block,
                                bool double_quant);
// The f32 absmax values of qw (from the nested codes when double-quantised).
Tensor weight_absmax(ExecContext& ctx, const QuantizedWeight& qw);
// y (qw's shape or n values, f32 or bf16) = the whole weight read back.
void dequantize_weight(ExecContext& ctx, Tensor& y, const QuantizedWeight& qw);

// The linear layer over a frozen quantised weight w (OUT, IN): tiles of rows of w are
// dequantised into workspace (bf16 when x/dy are bf16, f32 otherwise) and handed to the GEMM, so
// the whole weight is never held in full precision. No weight gradient (the base is frozen).
// x: (N, IN); b: (OUT) or undefined; y: (N, OUT).
void linear_forward_quantized(ExecContext& ctx, Tensor& y, const Tensor& x,
                              const QuantizedWeight& w, const Tensor& b);
// dx (N, IN) = dy W, overwritten or added (accumulate).
void linear_backward_input_quantized(ExecContext& ctx, Tensor& dx, const Tensor& dy,
                                     const QuantizedWeight& w, bool accumulate = false);

}  // namespace braid
