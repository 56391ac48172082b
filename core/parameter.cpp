// Parameters: lazy gradients, binding, shard ranges and the shard copies.
#include "core/parameter.h"

#include "core/context.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/shard_copy.h"

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

// The shard copies as the range kernels see them: the shard's ranges along `dim` of the full
// tensor; an unsplit tensor is one range over all its elements.
void copy_shard(ExecContext& ctx, Tensor& full, Tensor& shard, const ShardSpec& spec, int part,
                bool to_shard) {
  BRAID_CHECK(full.dtype() == shard.dtype(), "shard dtype {} vs full {}", shard.str(), full.str());
  check_shape(shard, spec.local_shape(full.shape()), "shard");
  Tensor f = full, s = shard;
  int dim = spec.dim;
  IndexRanges ranges;
  if (spec.sharded()) {
    ranges = spec.ranges(full.shape(), part);
  } else {
    f = full.view({full.numel()});
    s = shard.view({shard.numel()});
    dim = 0;
    ranges = {{0, full.numel()}};
  }
  if (to_shard)
    extract_ranges(ctx, s, f, dim, ranges);
  else
    insert_ranges(ctx, f, s, dim, ranges);
}

// The context the host overloads run the kernels on (host tensors: checkpoint files, a full
// init drawn on the host).
void require_host(const Tensor& t, const char* what) {
  BRAID_CHECK(t.device().is_cpu(), "{} of a {} tensor needs a context on its device", what,
              t.device().str());
}

}  // namespace

Tensor extract_shard(ExecContext& ctx, const Tensor& full, const ShardSpec& spec, int part) {
  if (full.is_meta())  // a deferred weight: only its shape is placed
    return Tensor::meta(full.allocator(), spec.local_shape(full.shape()), full.dtype(),
                        MemCategory::Weights);
  Tensor s = full.new_empty(spec.local_shape(full.shape()), full.dtype(), MemCategory::Weights);
  Tensor f = full;
  copy_shard(ctx, f, s, spec, part, true);
  return s;
}

void insert_shard(ExecContext& ctx, Tensor& full, const Tensor& shard, const ShardSpec& spec,
                  int part) {
  Tensor s = shard;
  copy_shard(ctx, full, s, spec, part, false);
}

Tensor extract_shard(const Tensor& full, const ShardSpec& spec, int part) {
  require_host(full, "extract_shard");
  ExecContext host;
  return extract_shard(host, full, spec, part);
}

void insert_shard(Tensor& full, const Tensor& shard, const ShardSpec& spec, int part) {
  require_host(full, "insert_shard");
  ExecContext host;
  insert_shard(host, full, shard, spec, part);
}

Parameter::Parameter(std::string n, Tensor v, bool trainable_)
    : name(std::move(n)), value(std::move(v)), global_shape(value.shape()), trainable(trainable_) {}

Tensor& Parameter::grad() {
  BRAID_CHECK(trainable, "{} is frozen and has no gradient", name);
  if (!grad_.defined()) grad_ = value.new_zeros(value.shape(), DType::F32, MemCategory::Grads);
  settle_grad();
  return grad_;
}

const Tensor& Parameter::grad_if_any() const {
  settle_grad();
  return grad_;
}

void Parameter::settle_grad() const {
  if (!zero_pending_) return;
  ExecContext& ctx = *zero_pending_;
  zero_pending_ = nullptr;
  zero(ctx, grad_);
}

Tensor& Parameter::grad_for_overwrite(bool* overwrite) {
  BRAID_CHECK(trainable, "{} is frozen and has no gradient", name);
  *overwrite = zero_pending_ != nullptr && grad_.defined();
  if (*overwrite) {
    zero_pending_ = nullptr;
    return grad_;
  }
  return grad();
}

void Parameter::bind_grad(Tensor view) {
  BRAID_CHECK(trainable, "bind_grad on frozen {}", name);
  check_shape(view, value.shape(), name.c_str());
  check_dtype(view, DType::F32, name.c_str());
  grad_ = std::move(view);
  zero_pending_ = nullptr;
}

void Parameter::zero_grad() {
  zero_pending_ = nullptr;
  if (grad_.defined()) grad_.zero_();
}

void Parameter::defer_zero_grad(ExecContext& ctx) {
  if (grad_.defined()) zero_pending_ = &ctx;
}

void Parameter::freeze() {
  trainable = false;
  grad_ = Tensor();
  zero_pending_ = nullptr;
}

}  // namespace braid
