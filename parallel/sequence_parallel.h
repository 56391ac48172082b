// Sequence parallelism (Korthikanti et al. 2022): between the tensor-parallel regions of a
// block (norms, residual adds, the embedding's output and the loss head's input) each
// tensor-parallel rank holds its slice of every sequence instead of the whole activation:
// rank r of tp keeps positions [r T / tp, (r + 1) T / tp) of each of the B sequences, as a
// (B, T / tp, C) tensor. Entering a region all-gathers the slices (forward) and reduce-scatters
// the input gradient (backward); leaving one reduce-scatters the partial sums (forward) and
// all-gathers the output gradient (backward). That is the same traffic as the all-reduce pair
// it replaces (an all-reduce is a reduce-scatter followed by an all-gather), while the norms,
// residuals and what they keep for the backward shrink by tp.
//
// Parameters used on the slices (the norms' weights and biases) get partial gradients on
// each rank; the tensor-parallel pass marks them replicated over tp (ShardSpec::replicas) so
// that their holders' partial gradients are summed after the backward (sum_replicated_parts).
//
// The collectives' buffers hold the ranks' slices rank after rank; the reorders between them
// and the (B, T, C) layout are kernels (core/kernels/seq_reorder.h).
#pragma once

#include "core/context.h"
#include "parallel/communicator.h"

namespace braid {

// (B, T / n, C) slices of every rank -> the whole (B, T, C), in x's dtype (no arithmetic).
Tensor seq_all_gather(ExecContext& ctx, Communicator& tp, const Tensor& x);

// The whole (B, T, C) partial tensors of every rank -> this rank's (B, T / n, C) slice of their
// sum, in `out_dtype`. The sum runs in `partial`'s dtype (f32 partials are summed in f32 and
// rounded once to a 16-bit out_dtype).
Tensor seq_reduce_scatter(ExecContext& ctx, Communicator& tp, const Tensor& partial,
                          DType out_dtype);

}  // namespace braid
