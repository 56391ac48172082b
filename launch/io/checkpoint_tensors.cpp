// CheckpointTensors: whole tensors out of one file or out of per-(tp, pp) shard files.
#include "launch/io/checkpoint_tensors.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace braid {

std::string checkpoint_file_name(const std::string& kind, int tp, int pp, int tp_rank, int stage) {
  if (tp == 1 && pp == 1) return kind + ".safetensors";
  return fmt::format("{}-tp{}-pp{}.safetensors", kind, tp_rank, stage);
}

nlohmann::json shard_record(const Parameter& p, int tp_rank) {
  if (!p.shard.sharded()) return nullptr;
  const int part = p.shard.part_of(tp_rank);
  return {{"dim", p.shard.dim}, {"parts", p.shard.parts},         {"blocks", p.shard.blocks},
          {"part", part},       {"global_shape", p.global_shape}, {"logical", p.shard.logical}};
}

nlohmann::json absmax_shard_record(const Parameter& p, int tp_rank, int64_t local_blocks) {
  if (!p.shard.sharded()) return nullptr;
  const int parts = p.shard.parts;
  return {{"dim", 0},
          {"parts", parts},
          {"blocks", std::vector<int64_t>{}},
          {"part", p.shard.part_of(tp_rank)},
          {"global_shape", Shape{parts * local_blocks}},
          {"logical", -1}};
}

nlohmann::json state_shard_record(const std::string& name, const Parameter& p, int tp_rank,
                                  int64_t local_blocks) {
  return name.ends_with("_absmax") ? absmax_shard_record(p, tp_rank, local_blocks)
                                   : shard_record(p, tp_rank);
}

Tensor absmax_local_part(const std::string& name, const Tensor& whole, const Parameter& p,
                         int tp_rank, int64_t local_blocks) {
  const int parts = p.shard.sharded() ? p.shard.parts : 1;
  BRAID_USER_CHECK(whole.ndim() == 1 && whole.numel() == parts * local_blocks,
                   "optimizer state {} holds {} block scales, but {} 8-bit block(s) of {} here "
                   "need {}: the checkpoint's 8-bit moments were written under another "
                   "tensor-parallel size (they are quantised per rank's part); resume with the "
                   "parallel.tp that wrote it",
                   name, whole.numel(), parts, p.name, parts * local_blocks);
  if (parts == 1) return whole;
  const int64_t k = p.shard.part_of(tp_rank);
  return whole.slice0(k * local_blocks, (k + 1) * local_blocks);
}

namespace {

ShardSpec spec_of(const nlohmann::json& r) {
  ShardSpec s;
  s.dim = r.at("dim").get<int>();
  s.parts = r.at("parts").get<int>();
  s.blocks = r.at("blocks").get<std::vector<int64_t>>();
  s.logical = r.at("logical").get<int64_t>();
  return s;
}

// `t` with dimension 0 cut back to `rows` (vocabulary padding), as a new tensor.
Tensor first_rows(const Tensor& t, int64_t rows) {
  if (rows < 0 || rows == t.dim(0)) return t;
  return t.slice0(0, rows).clone(MemCategory::Weights);
}

}  // namespace

CheckpointTensors::CheckpointTensors(SafetensorsFile file) : where_(file.path()) {
  files_.emplace_back(file.path(), std::move(file));
  for (const std::string& n : files_[0].second.names()) {
    index_[n].push_back({0, nullptr});
    order_.push_back(n);
  }
}

CheckpointTensors::CheckpointTensors(std::vector<std::pair<std::string, SafetensorsFile>> files,
                                     const nlohmann::json& shards, const std::string& where)
    : files_(std::move(files)), where_(where) {
  for (size_t f = 0; f < files_.size(); ++f) {
    const auto& [fname, file] = files_[f];
    const nlohmann::json recs =
        shards.is_object() && shards.contains(fname) ? shards.at(fname) : nlohmann::json::object();
    for (const std::string& n : file.names()) {
      nlohmann::json rec = recs.is_object() && recs.contains(n) ? recs.at(n) : nlohmann::json();
      try {
        if (!rec.is_null() && rec.contains("flat_begin")) {
          const Shape global = rec.at("global_shape").get<Shape>();
          const int64_t begin = rec.at("flat_begin").get<int64_t>();
          BRAID_USER_CHECK(file.shape(n).size() == 1 && begin >= 0 &&
                               begin + file.shape(n)[0] <= shape_numel(global),
                           "{}: {} in {} is a piece of {} elements at {} that does not fit {}",
                           where_, n, fname, file.shape(n).empty() ? 0 : file.shape(n)[0], begin,
                           shape_str(global));
          if (rec.contains("tp")) {  // a piece of one tensor-parallel part
            const nlohmann::json& t = rec.at("tp");
            const ShardSpec s = spec_of(t);
            const Shape whole = t.at("global_shape").get<Shape>();
            s.validate(whole, n);
            const int part = t.at("part").get<int>();
            BRAID_USER_CHECK(part >= 0 && part < s.parts && s.local_shape(whole) == global,
                             "{}: {} in {} is a piece of part {} of {} whose shape {} does not "
                             "fit its record (global shape {})",
                             where_, n, fname, part, s.parts, shape_str(global), shape_str(whole));
          }
        } else if (!rec.is_null()) {
          const ShardSpec s = spec_of(rec);  // throws on a malformed record
          const Shape global = rec.at("global_shape").get<Shape>();
          s.validate(global, n);
          const int part = rec.at("part").get<int>();
          BRAID_USER_CHECK(part >= 0 && part < s.parts && s.local_shape(global) == file.shape(n),
                           "{}: {} in {} is part {} of {} with shape {}, which does not fit its "
                           "record (global shape {})",
                           where_, n, fname, part, s.parts, shape_str(file.shape(n)),
                           shape_str(global));
          BRAID_USER_CHECK(s.logical < 0 || (s.dim == 0 && s.logical <= global[0]),
                           "{}: {} records an unpadded size {} that does not fit {}", where_, n,
                           s.logical, shape_str(global));
        }
      } catch (const nlohmann::json::exception& e) {
        user_error("{}: malformed shard record for {} in {} ({}); the checkpoint is corrupt",
                   where_, n, fname, e.what());
      }
      if (!index_.count(n)) order_.push_back(n);
      index_[n].push_back({f, std::move(rec)});
    }
  }
  // Every split tensor has each of its parts exactly once, with one consistent split.
  for (const auto& [n, parts] : index_) {
    if (parts.size() == 1 && parts[0].record.is_null()) continue;
    const nlohmann::json& r0 = parts[0].record;
    BRAID_USER_CHECK(!r0.is_null(), "{}: {} is stored whole and split at once", where_, n);
    if (r0.contains("flat_begin")) {
      // ZeRO pieces: together they cover the tensor (or each of its tensor-parallel parts)
      // exactly once.
      const bool split = r0.contains("tp");
      const int n_parts = split ? r0.at("tp").at("parts").get<int>() : 1;
      std::vector<std::vector<std::pair<int64_t, int64_t>>> pieces(static_cast<size_t>(n_parts));
      for (const Part& p : parts) {
        const nlohmann::json& r = p.record;
        BRAID_USER_CHECK(
            !r.is_null() && r.contains("flat_begin") &&
                r.at("global_shape") == r0.at("global_shape") && r.contains("tp") == split &&
                (!split || (r.at("tp").at("parts") == r0.at("tp").at("parts") &&
                            r.at("tp").at("dim") == r0.at("tp").at("dim") &&
                            r.at("tp").at("global_shape") == r0.at("tp").at("global_shape"))),
            "{}: the pieces of {} disagree on how it is split", where_, n);
        const int part = split ? r.at("tp").at("part").get<int>() : 0;
        pieces[static_cast<size_t>(part)].emplace_back(r.at("flat_begin").get<int64_t>(),
                                                       files_[p.file].second.shape(n)[0]);
      }
      const int64_t numel = shape_numel(r0.at("global_shape").get<Shape>());
      for (int k = 0; k < n_parts; ++k) {
        std::vector<std::pair<int64_t, int64_t>>& ps = pieces[static_cast<size_t>(k)];
        std::sort(ps.begin(), ps.end());
        int64_t next = 0;
        for (const auto& [b, len] : ps) {
          BRAID_USER_CHECK(b == next,
                           "{}: the pieces of {} (part {}) leave a gap or overlap at element {}",
                           where_, n, k, next);
          next = b + len;
        }
        BRAID_USER_CHECK(next == numel,
                         "{}: the pieces of {} (part {} of {}) cover {} of its {} elements (a "
                         "shard file is missing)",
                         where_, n, k, n_parts, next, numel);
      }
      continue;
    }
    const int want = r0.at("parts").get<int>();
    std::vector<int> seen(static_cast<size_t>(want), 0);
    for (const Part& p : parts) {
      BRAID_USER_CHECK(!p.record.is_null() && p.record.at("parts") == r0.at("parts") &&
                           p.record.at("dim") == r0.at("dim") &&
                           p.record.at("global_shape") == r0.at("global_shape"),
                       "{}: the parts of {} disagree on how it is split", where_, n);
      ++seen[static_cast<size_t>(p.record.at("part").get<int>())];
    }
    for (int k = 0; k < want; ++k)
      BRAID_USER_CHECK(seen[static_cast<size_t>(k)] == 1,
                       "{}: {} has {} copies of part {} of {}; expected one (a shard file is "
                       "missing or duplicated)",
                       where_, n, seen[static_cast<size_t>(k)], k, want);
  }
}

std::vector<std::string> CheckpointTensors::names() const { return order_; }

Shape CheckpointTensors::shape(const std::string& name) const {
  const auto it = index_.find(name);
  BRAID_USER_CHECK(it != index_.end(), "{}: has no tensor {}", where_, name);
  const Part& p = it->second[0];
  if (p.record.is_null()) return files_[p.file].second.shape(name);
  const nlohmann::json& r =
      p.record.contains("flat_begin") && p.record.contains("tp") ? p.record.at("tp") : p.record;
  Shape g = r.at("global_shape").get<Shape>();
  if (r.contains("flat_begin")) return g;
  const int64_t logical = r.at("logical").get<int64_t>();
  if (logical >= 0) g[0] = logical;
  return g;
}

DType CheckpointTensors::dtype(const std::string& name) const {
  const auto it = index_.find(name);
  BRAID_USER_CHECK(it != index_.end(), "{}: has no tensor {}", where_, name);
  const SafetensorsFile& f = files_[it->second[0].file].second;
  const SafetensorsInfo& info = f.info(name);
  BRAID_USER_CHECK(info.dtype.has_value(), "{}: {} has dtype {}, which braid does not read",
                   f.path(), name, info.dtype_name);
  return *info.dtype;
}

Tensor CheckpointTensors::get(const std::string& name) const {
  const auto it = index_.find(name);
  BRAID_USER_CHECK(it != index_.end(), "{}: has no tensor {}", where_, name);
  const std::vector<Part>& parts = it->second;
  if (parts[0].record.is_null()) return files_[parts[0].file].second.get(name);
  const nlohmann::json& r0 = parts[0].record;
  if (r0.contains("flat_begin")) {
    // Each tensor-parallel part (one, unless split) from its pieces, then the parts in place.
    const bool split = r0.contains("tp");
    const int n_parts = split ? r0.at("tp").at("parts").get<int>() : 1;
    std::vector<Tensor> local(static_cast<size_t>(n_parts));
    for (Tensor& t : local) t = Tensor::zeros(r0.at("global_shape").get<Shape>(), dtype(name));
    for (const Part& p : parts) {
      const Tensor piece = files_[p.file].second.get(name);
      const int64_t b = p.record.at("flat_begin").get<int64_t>();
      const int part = split ? p.record.at("tp").at("part").get<int>() : 0;
      Tensor flat = local[static_cast<size_t>(part)].view({local[0].numel()});
      flat.slice0(b, b + piece.numel()).copy_from(piece);
    }
    if (!split) return local[0];
    const nlohmann::json& t = r0.at("tp");
    const ShardSpec spec = spec_of(t);
    Tensor full = Tensor::zeros(t.at("global_shape").get<Shape>(), dtype(name));
    for (int k = 0; k < n_parts; ++k) insert_shard(full, local[static_cast<size_t>(k)], spec, k);
    return first_rows(full, spec.logical);
  }
  const ShardSpec spec = spec_of(r0);
  Tensor full = Tensor::zeros(r0.at("global_shape").get<Shape>(), dtype(name));
  for (const Part& p : parts)
    insert_shard(full, files_[p.file].second.get(name), spec, p.record.at("part").get<int>());
  return first_rows(full, spec.logical);
}

void check_tensor_matches(const CheckpointTensors& tensors, const std::string& name,
                          const Shape& expected_shape, DType expected_dtype) {
  if (!tensors.contains(name))
    user_error(
        "{}: has no tensor {} but the model expects one of shape {}; the checkpoint was "
        "written for a different model config",
        tensors.where(), name, shape_str(expected_shape));
  const Shape got = tensors.shape(name);
  if (got != expected_shape)
    user_error(
        "{}: {} has shape {} but the model expects {}; the checkpoint was written for a "
        "different model config",
        tensors.where(), name, shape_str(got), shape_str(expected_shape));
  const DType dt = tensors.dtype(name);
  if (dt != expected_dtype)
    user_error(
        "{}: {} has dtype {} but the model expects {}; the checkpoint was written with "
        "different precision settings",
        tensors.where(), name, dtype_safetensors(dt), dtype_safetensors(expected_dtype));
}

Shape whole_shape_of(const Parameter& p) {
  Shape s = p.global_shape;
  if (p.shard.logical >= 0) s[static_cast<size_t>(p.shard.dim)] = p.shard.logical;
  return s;
}

Tensor local_part_of(const Tensor& whole, const Parameter& p, int tp_rank) {
  const int part = p.shard.part_of(tp_rank);
  if (!p.shard.sharded()) return whole;
  Tensor full = whole;
  if (whole.shape() != p.global_shape) {  // the padded vocabulary rows, zero
    BRAID_CHECK(p.shard.logical == whole.dim(0) && p.global_shape.size() == whole.shape().size(),
                "{}: whole tensor {} does not fit global shape {}", p.name, whole.str(),
                shape_str(p.global_shape));
    full = Tensor::zeros(p.global_shape, whole.dtype());
    std::memcpy(full.raw(), whole.raw(), whole.nbytes());  // rows are contiguous
  }
  return extract_shard(full, p.shard, part);
}

}  // namespace braid
