// CheckpointTensors: one kind of a checkpoint's tensors (the model weights, or the optimizer
// state) read as whole tensors by name, whatever (tp, pp) layout wrote them.
//
// A run with tp = pp = 1 writes one file per kind (model.safetensors, optimizer.safetensors).
// Any other layout writes one file per (tensor-parallel rank, pipeline stage), e.g.
// model-tp1-pp0.safetensors, holding that rank's part of every tensor it owns: replicated
// tensors whole (written by tensor-parallel rank 0 only), split ones as their shard. The
// manifest's "shards" section records, per file and split tensor, the split (dim, parts, fused
// blocks), the part, the global shape and the unpadded size of the split dimension. get()
// puts the parts back together and cuts the padding off, so a checkpoint loads into any other
// layout, including one rank, and export writes the plain model. ZeRO-1 writes each DP rank's
// part of the optimizer state as 1-D pieces of the flattened tensors (records
// {"flat_begin", "global_shape"}), which get() puts end to end; under tensor parallelism the
// pieces are of the rank's part (global_shape is the part's shape) and carry the part's record
// under "tp": get() rebuilds every part from its pieces, then the whole from the parts.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/parameter.h"
#include "core/safetensors.h"

namespace braid {

// The file of `kind` ("model" or "optimizer") written by (tp_rank, stage) of a tp x pp layout.
std::string checkpoint_file_name(const std::string& kind, int tp, int pp, int tp_rank, int stage);

// The manifest record of a split tensor as tensor-parallel rank `tp_rank` holds it (part
// p.shard.part_of(tp_rank)): {"dim", "parts", "blocks", "part", "global_shape", "logical"}.
// Null for a tensor that is not split.
nlohmann::json shard_record(const Parameter& p, int tp_rank);
// The record of an 8-bit optimizer absmax ("<param>.exp_avg_absmax", one f32 per block of 2048
// of the rank's own part, so it is not a slice of a whole tensor's absmax) of a split parameter:
// the parts' absmax put end to end, `local_blocks` each, part p.shard.part_of(tp_rank) in place.
// Null for a parameter that is not split. A checkpoint's 8-bit moments therefore load only into
// the tensor-parallel size that wrote them (absmax_local_part).
nlohmann::json absmax_shard_record(const Parameter& p, int tp_rank, int64_t local_blocks);
// The record a checkpoint stores for state tensor `name` of p: absmax_shard_record for an
// "_absmax" name, else shard_record.
nlohmann::json state_shard_record(const std::string& name, const Parameter& p, int tp_rank,
                                  int64_t local_blocks);
// Rank `tp_rank`'s absmax of p out of the whole (end-to-end) one a checkpoint holds; throws
// UserError naming `name` when its size says another tensor-parallel layout wrote it.
Tensor absmax_local_part(const std::string& name, const Tensor& whole, const Parameter& p,
                         int tp_rank, int64_t local_blocks);

class CheckpointTensors {
 public:
  CheckpointTensors() = default;
  // The tp = pp = 1 layout: one file, whole tensors.
  explicit CheckpointTensors(SafetensorsFile file);
  // A sharded layout: the kind's files and the manifest's "shards" records of those files
  // (file name -> tensor name -> shard_record). Throws UserError naming `where` when a split
  // tensor lacks a part or the records contradict each other.
  CheckpointTensors(std::vector<std::pair<std::string, SafetensorsFile>> files,
                    const nlohmann::json& shards, const std::string& where);

  std::vector<std::string> names() const;  // whole tensors, in the order first seen
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  Shape shape(const std::string& name) const;  // the whole, unpadded shape
  DType dtype(const std::string& name) const;
  // The whole tensor (a view into the file where it is stored whole, else assembled).
  Tensor get(const std::string& name) const;
  const std::string& where() const { return where_; }  // for messages

 private:
  struct Part {
    size_t file;
    nlohmann::json record;  // null: the tensor is stored whole in `file`
  };
  std::vector<std::pair<std::string, SafetensorsFile>> files_;
  std::map<std::string, std::vector<Part>> index_;
  std::vector<std::string> order_;
  std::string where_;
};

// Throws braid::UserError when `tensors` lacks `name` or holds it with another shape or
// dtype, naming the checkpoint (the same messages as check_tensor_matches).
void check_tensor_matches(const CheckpointTensors& tensors, const std::string& name,
                          const Shape& expected_shape, DType expected_dtype);

// The whole (unpadded) shape of p across tensor-parallel ranks: what a checkpoint stores.
Shape whole_shape_of(const Parameter& p);

// The part of a whole (unpadded) tensor that parameter p holds on tensor-parallel rank
// `tp_rank`: padded with zeros to p's global shape, then cut by p's ShardSpec. A new tensor.
Tensor local_part_of(const Tensor& whole, const Parameter& p, int tp_rank);

}  // namespace braid
