// Tensor and Storage.
#include "core/tensor.h"

#include <cstring>
#include <vector>

#include "core/device_memory.h"
#include "core/kernels/cuda/runtime.h"

namespace braid {

std::string shape_str(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ", ";
    r += std::to_string(s[i]);
  }
  return r + "]";
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Storage::Storage(size_t bytes, std::shared_ptr<Allocator> allocator, MemCategory cat)
    : bytes_(bytes), allocator_(std::move(allocator)), cat_(cat) {
  data_ = allocator_->allocate(bytes, cat);
}

Storage::Storage(std::shared_ptr<Allocator> allocator, MemCategory cat)
    : meta_(true), allocator_(std::move(allocator)), cat_(cat) {}

Storage::~Storage() {
  if (!meta_) allocator_->deallocate(data_, bytes_, cat_);
}

namespace {
bool on_host(const Tensor& t) { return t.device().is_cpu(); }
}  // namespace

Tensor Tensor::unbacked(const Shape& shape, DType dtype) {
  for (int64_t d : shape) BRAID_CHECK(d >= 0, "negative dimension in shape {}", shape_str(shape));
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::meta(std::shared_ptr<Allocator> allocator, const Shape& shape, DType dtype,
                    MemCategory cat) {
  Tensor t = unbacked(shape, dtype);
  t.storage_ = std::make_shared<Storage>(std::move(allocator), cat);
  return t;
}

Tensor Tensor::empty(std::shared_ptr<Allocator> allocator, const Shape& shape, DType dtype,
                     MemCategory cat) {
  Tensor t = unbacked(shape, dtype);
  try {
    t.storage_ = std::make_shared<Storage>(t.nbytes(), std::move(allocator), cat);
  } catch (OutOfMemoryError& e) {
    e.set_tensor(std::string(dtype_name(dtype)) + shape_str(shape));
    throw;
  }
  return t;
}

Tensor Tensor::empty(const Shape& shape, DType dtype) {
  return empty(plain_host_allocator(), shape, dtype, MemCategory::Other);
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  t.zero_();
  return t;
}

const std::shared_ptr<Allocator>& Tensor::allocator() const {
  BRAID_CHECK(storage_, "allocator() of an undefined tensor");
  return storage_->allocator();
}

Tensor Tensor::new_empty(const Shape& shape, DType dtype, MemCategory cat) const {
  return empty(storage_ ? storage_->allocator() : plain_host_allocator(), shape, dtype, cat);
}

Tensor Tensor::new_zeros(const Shape& shape, DType dtype, MemCategory cat) const {
  Tensor t = new_empty(shape, dtype, cat);
  t.zero_();
  return t;
}

Tensor Tensor::from_vector(const std::vector<float>& v, const Shape& shape) {
  Tensor t = empty(shape, DType::F32);
  BRAID_CHECK(static_cast<int64_t>(v.size()) == t.numel(), "{} values for shape {}", v.size(),
              shape_str(shape));
  std::memcpy(t.raw(), v.data(), t.nbytes());
  return t;
}

Tensor Tensor::from_vector_i32(const std::vector<int32_t>& v, const Shape& shape) {
  Tensor t = empty(shape, DType::I32);
  BRAID_CHECK(static_cast<int64_t>(v.size()) == t.numel(), "{} values for shape {}", v.size(),
              shape_str(shape));
  std::memcpy(t.raw(), v.data(), t.nbytes());
  return t;
}

int64_t Tensor::dim(int i) const {
  const int n = ndim();
  if (i < 0) i += n;
  BRAID_CHECK(i >= 0 && i < n, "dim {} of a {}-d tensor", i, n);
  return shape_[i];
}

float* Tensor::f32() const {
  BRAID_CHECK(dtype_ == DType::F32, "expected f32, tensor is {}", dtype_name(dtype_));
  return data<float>();
}

int32_t* Tensor::i32() const {
  BRAID_CHECK(dtype_ == DType::I32, "expected i32, tensor is {}", dtype_name(dtype_));
  return data<int32_t>();
}

Tensor Tensor::view(const Shape& shape) const {
  Shape s = shape;
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      BRAID_CHECK(infer < 0, "more than one -1 in view shape {}", shape_str(shape));
      infer = static_cast<int>(i);
    } else {
      known *= s[i];
    }
  }
  if (infer >= 0) {
    BRAID_CHECK(known > 0 && numel() % known == 0, "cannot view {} as {}", shape_str(shape_),
                shape_str(shape));
    s[infer] = numel() / known;
  }
  BRAID_CHECK(shape_numel(s) == numel(), "cannot view {} as {}", shape_str(shape_),
              shape_str(shape));
  Tensor t = *this;
  t.shape_ = s;
  return t;
}

Tensor Tensor::slice0(int64_t begin, int64_t end) const {
  BRAID_CHECK(ndim() >= 1 && begin >= 0 && begin <= end && end <= shape_[0],
              "slice0({}, {}) of shape {}", begin, end, shape_str(shape_));
  const int64_t row = shape_[0] == 0 ? 0 : numel() / shape_[0];
  Tensor t = *this;
  t.shape_[0] = end - begin;
  t.offset_bytes_ += static_cast<size_t>(begin * row) * dtype_size(dtype_);
  return t;
}

Tensor Tensor::clone(MemCategory cat) const {
  Tensor t = new_empty(shape_, dtype_, cat);
  t.copy_from(*this);
  return t;
}

void Tensor::copy_from(const Tensor& src) {
  BRAID_CHECK(src.numel() == numel() && src.dtype() == dtype_, "copy {} into {}", src.str(), str());
  if (!nbytes()) return;
  if (on_host(*this) && on_host(src))
    std::memmove(raw(), src.raw(), nbytes());
  else
    cuda::copy_sync(raw(), src.raw(), nbytes());
}

Tensor Tensor::to(const std::shared_ptr<Allocator>& allocator, MemCategory cat) const {
  Tensor t = empty(allocator, shape_, dtype_, cat);
  t.copy_from(*this);
  return t;
}

Tensor Tensor::to_host() const {
  if (on_host(*this)) return *this;
  return to(plain_host_allocator(), MemCategory::Other);
}

Tensor Tensor::to(DType dt, MemCategory cat) const {
  if (dt == dtype_) return clone(cat);
  if (!on_host(*this)) {
    // Device tensors convert through host memory (set-up and checkpoints, not the step: the
    // step's casts are the cast kernel on the context's stream).
    Tensor h = to_host().to(dt, MemCategory::Other);
    return h.to(allocator(), cat);
  }
  Tensor t = new_empty(shape_, dt, cat);
  const int64_t n = numel();
  auto load = [&](int64_t i) -> float {
    switch (dtype_) {
      case DType::F32:
        return data<float>()[i];
      case DType::BF16:
        return bf16_to_float(data<bf16>()[i]);
      case DType::F16:
        return f16_to_float(data<f16>()[i]);
      default:
        BRAID_CHECK(false, "cannot convert {} to {}", dtype_name(dtype_), dtype_name(dt));
    }
  };
  for (int64_t i = 0; i < n; ++i) {
    const float v = load(i);
    switch (dt) {
      case DType::F32:
        t.data<float>()[i] = v;
        break;
      case DType::BF16:
        t.data<bf16>()[i] = float_to_bf16(v);
        break;
      case DType::F16:
        t.data<f16>()[i] = float_to_f16(v);
        break;
      default:
        BRAID_CHECK(false, "cannot convert {} to {}", dtype_name(dtype_), dtype_name(dt));
    }
  }
  return t;
}

void Tensor::zero_() {
  if (!nbytes()) return;
  if (on_host(*this)) {
    std::memset(raw(), 0, nbytes());
  } else {
    cuda::memset_sync(raw(), 0, nbytes());
  }
}

void Tensor::fill_(float v) {
  BRAID_CHECK(dtype_ == DType::F32, "fill_ of {}: f32 only", str());
  if (!on_host(*this)) {
    Tensor h = Tensor::empty(shape_, dtype_);
    h.fill_(v);
    copy_from(h);
    return;
  }
  float* p = f32();
  const int64_t n = numel();
  for (int64_t i = 0; i < n; ++i) p[i] = v;
}

std::string Tensor::str() const {
  if (!defined()) return "undefined";
  return std::string(dtype_name(dtype_)) + shape_str(shape_) + " " + device().str();
}

void check_shape(const Tensor& t, const Shape& expected, const char* name) {
  BRAID_CHECK(t.defined() && t.shape() == expected, "{} has shape {}, expected {}", name,
              t.defined() ? shape_str(t.shape()) : "undefined", shape_str(expected));
}

void check_dtype(const Tensor& t, DType expected, const char* name) {
  BRAID_CHECK(t.defined() && t.dtype() == expected, "{} has dtype {}, expected {}", name,
              t.defined() ? dtype_name(t.dtype()) : "undefined", dtype_name(expected));
}

}  // namespace braid
