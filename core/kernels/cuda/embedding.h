// Launchers of the embedding kernels (core/kernels/cuda/embedding.cu). tokens: N = B T int32
// positions; tables and gradients row-major (rows, C); dtype codes f32/bf16/f16 per argument;
// `stream` a cudaStream_t. All device memory.
#pragma once

#include <cstdint>

namespace braid::cuda {

// bad[0] = the smallest position whose token is outside [0, vocab), left as it was (all ones
// beforehand) when there is none.
void launch_check_tokens(void* stream, unsigned long long* bad, const int32_t* tokens, int64_t N,
                         int64_t vocab);

// out (N, C) = (wte row tokens[i] - row_begin when in [0, rows), else 0) + (wpe ? wpe row
// pos_offset + i % T : 0).
void launch_embedding_forward(void* stream, void* out, int tout, const int32_t* tokens,
                              const void* wte, int twte, int64_t rows, int64_t row_begin,
                              const void* wpe, int twpe, int64_t pos_offset, int64_t N, int64_t T,
                              int64_t C);

// dwte (rows, C) += the dout rows of the positions whose token is in [row_begin, row_begin +
// rows), every element adding its positions in position order onto its initial value (in f32,
// rounded once). Tokens elsewhere are skipped. N < 2^31.
void launch_embedding_table_grad(void* stream, void* dwte, int tdwte, int64_t rows,
                                 int64_t row_begin, const void* dout, int tdout,
                                 const int32_t* tokens, int64_t N, int64_t C);

// dwpe row pos_offset + t += the sum over b in order of dout (b, t), for t in [0, T).
void launch_embedding_position_grad(void* stream, void* dwpe, int tdwpe, const void* dout,
                                    int tdout, int64_t B, int64_t T, int64_t C, int64_t pos_offset);

}  // namespace braid::cuda
