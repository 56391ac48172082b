// F32Staging: widen inputs, stage outputs in f32 workspace, narrow them back.
#include "core/kernels/cpu/lowp.h"

#include <cstring>

#include "core/kernels/cpu/convert.h"
#include "core/kernels/cpu/cpu_checks.h"

namespace braid::cpu {
namespace {

bool is_low(DType t) { return t == DType::BF16 || t == DType::F16; }

void check_float(const Tensor& t, const char* op, const char* name) {
  check_cpu(t, op, name);
  BRAID_CHECK(t.dtype() == DType::F32 || is_low(t.dtype()),
              "{}: {} has dtype {}; expected f32, bf16 or f16", op, name, dtype_name(t.dtype()));
}

}  // namespace

bool any_low_precision(std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (t->defined() && is_low(t->dtype())) return true;
  return false;
}

Tensor F32Staging::in(const Tensor& t, const char* name) {
  if (!t.defined()) return t;
  check_float(t, op_, name);
  if (t.dtype() == DType::F32) return t;
  Tensor w = ctx_.empty(t.shape(), DType::F32, MemCategory::Workspace);
  widen_to_f32(ctx_, t.dtype(), t.raw(), w.f32(), t.numel());
  return w;
}

Tensor F32Staging::out(Tensor& t, const char* name, bool keep_contents) {
  if (!t.defined()) return t;
  check_float(t, op_, name);
  if (t.dtype() == DType::F32) return t;
  Tensor w = ctx_.empty(t.shape(), DType::F32, MemCategory::Workspace);
  if (keep_contents) widen_to_f32(ctx_, t.dtype(), t.raw(), w.f32(), t.numel());
  outs_.emplace_back(t, w);
  return w;
}

void F32Staging::finish() {
  for (auto& [t, w] : outs_) narrow_from_f32(ctx_, t.dtype(), w.f32(), t.raw(), t.numel());
  outs_.clear();
}

const float* TileIo::in(const Tensor& t, int64_t off, int64_t n, float* buf) const {
  if (t.dtype() == DType::F32) return t.f32() + off;
  widen_to_f32(path_, t.dtype(), static_cast<const uint16_t*>(t.raw()) + off, buf, n);
  return buf;
}

float* TileIo::out(Tensor& t, int64_t off, float* buf) const {
  return t.dtype() == DType::F32 ? t.f32() + off : buf;
}

void TileIo::store(Tensor& t, int64_t off, int64_t n, const float* res) const {
  if (t.dtype() != DType::F32) {
    narrow_from_f32(path_, t.dtype(), res, static_cast<uint16_t*>(t.raw()) + off, n);
  } else if (res != t.f32() + off) {
    std::memcpy(t.f32() + off, res, sizeof(float) * static_cast<size_t>(n));
  }
}

void check_float_storage(const Tensor& t, const char* op, const char* name) {
  BRAID_CHECK(t.defined(), "{}: {} is undefined", op, name);
  check_float(t, op, name);  // includes the host check
}

}  // namespace braid::cpu
