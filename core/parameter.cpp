// Parameters: lazy gradients, binding, and shard ranges.
#include "core/parameter.h"

#include <cstring>

namespace braid {

Shape ShardSpec::local_shape(const Shape& global) const {
  if (!sharded()) return global;
  Shape s = global;
  s[dim] /= parts;
  return s;
}

void ShardSpec::validate(const Shape& global, const std::string& what) const {
  if (!sharded()) return;
  BRAID_CHECK(dim < static_cast<int>(global.size()), "{}: shard dim {} of a {}-d tensor", what, dim,
              global.size());
  int64_t total = 0;
  for (int64_t b : blocks) total += b;
  BRAID_CHECK(blocks.empty() || total == global[dim], "{}: blocks sum to {}, dim {} is {}", what,
              total, dim, global[dim]);
  const std::vector<int64_t> bs = blocks.empty() ? std::vector<int64_t>{global[dim]} : blocks;
  for (int64_t b : bs)
    BRAID_CHECK(b % parts == 0, "{}: a block of {} along dim {} does not split into {} parts", what,
                b, dim, parts);
}

std::vector<std::pair<int64_t, int64_t>> ShardSpec::ranges(const Shape& global, int part) const {
  if (!sharded()) return {{0, global.empty() ? 1 : global[0]}};
  validate(global, "shard");
  BRAID_CHECK(part >= 0 && part < parts, "part {} of {}", part, parts);
  const std::vector<int64_t> bs = blocks.empty() ? std::vector<int64_t>{global[dim]} : blocks;
  std::vector<std::pair<int64_t, int64_t>> r;
  int64_t offset = 0;
  for (int64_t b : bs) {
    const int64_t n = b / parts;
    r.emplace_back(offset + part * n, offset + (part + 1) * n);
    offset += b;
  }
  return r;
}

namespace {

// Copies between a full tensor and a shard: the shard's ranges along `dim` of the full tensor,
// for every index of the leading dims and whole trailing rows.
void copy_shard(const Tensor& full, const Tensor& shard, const ShardSpec& spec, int part,
                bool to_shard) {
  BRAID_CHECK(full.device().is_cpu() && shard.device().is_cpu(), "shard copies run on the host");
  BRAID_CHECK(full.dtype() == shard.dtype(), "shard dtype {} vs full {}", shard.str(), full.str());
  const Shape& g = full.shape();
  check_shape(shard, spec.local_shape(g), "shard");
  if (!spec.sharded()) {
    if (to_shard)
      std::memcpy(shard.raw(), full.raw(), full.nbytes());
    else
      std::memcpy(full.raw(), shard.raw(), full.nbytes());
    return;
  }
  const size_t es = dtype_size(full.dtype());
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < spec.dim; ++i) outer *= g[i];
  for (size_t i = spec.dim + 1; i < g.size(); ++i) inner *= g[i];
  const int64_t full_d = g[spec.dim], local_d = full_d / spec.parts;
  char* f = static_cast<char*>(full.raw());
  char* s = static_cast<char*>(shard.raw());
  for (int64_t o = 0; o < outer; ++o) {
    int64_t local = 0;
    for (auto [b, e] : spec.ranges(g, part)) {
      const size_t bytes = static_cast<size_t>((e - b) * inner) * es;
      char* fp = f + static_cast<size_t>((o * full_d + b) * inner) * es;
      char* sp = s + static_cast<size_t>((o * local_d + local) * inner) * es;
      if (to_shard)
        std::memcpy(sp, fp, bytes);
      else
        std::memcpy(fp, sp, bytes);
      local += e - b;
    }
  }
}

}  // namespace

Tensor extract_shard(const Tensor& full, const ShardSpec& spec, int part) {
  Tensor s = full.new_empty(spec.local_shape(full.shape()), full.dtype(), MemCategory::Weights);
  copy_shard(full, s, spec, part, true);
  return s;
}

void insert_shard(Tensor& full, const Tensor& shard, const ShardSpec& spec, int part) {
  copy_shard(full, shard, spec, part, false);
}

Parameter::Parameter(std::string n, Tensor v, bool trainable_)
    : name(std::move(n)), value(std::move(v)), global_shape(value.shape()), trainable(trainable_) {}

Tensor& Parameter::grad() {
  BRAID_CHECK(trainable, "{} is frozen and has no gradient", name);
  if (!grad_.defined()) grad_ = value.new_zeros(value.shape(), DType::F32, MemCategory::Grads);
  return grad_;
}

void Parameter::bind_grad(Tensor view) {
  BRAID_CHECK(trainable, "bind_grad on frozen {}", name);
  check_shape(view, value.shape(), name.c_str());
  check_dtype(view, DType::F32, name.c_str());
  grad_ = std::move(view);
}

void Parameter::zero_grad() {
  if (grad_.defined()) grad_.zero_();
}

void Parameter::freeze() {
  trainable = false;
  grad_ = Tensor();
}

}  // namespace braid
