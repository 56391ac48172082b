// Copies between a whole tensor and the part of it that index ranges along one dimension pick:
// a tensor-parallel shard (core/parameter.h's extract_shard / insert_shard turn a ShardSpec
// into the ranges). Pure copies, so any dtype (f32, bf16, f16, i32).
#pragma once

#include <utility>
#include <vector>

#include "core/context.h"

namespace braid {

// [begin, end) index ranges along one dimension, in the order the part holds them.
using IndexRanges = std::vector<std::pair<int64_t, int64_t>>;

// part = the ranges of `whole` along `dim`, one after another, at every index of the other
// dimensions: part has whole's shape with `dim` sized by the ranges' total length.
void extract_ranges(ExecContext& ctx, Tensor& part, const Tensor& whole, int dim,
                    const IndexRanges& ranges);
// The conjugate: those ranges of `whole` = part; the rest of whole is left as it was.
void insert_ranges(ExecContext& ctx, Tensor& whole, const Tensor& part, int dim,
                   const IndexRanges& ranges);

}  // namespace braid
