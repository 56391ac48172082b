// Tensor: contiguous row-major storage with shape, dtype and device; cheap to copy.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/memory.h"

namespace braid {

using Shape = std::vector<int64_t>;

std::string shape_str(const Shape& s);
int64_t shape_numel(const Shape& s);

// Owns one allocation. Tensors share it through shared_ptr.
class Storage {
 public:
  Storage(size_t bytes, Device device, MemCategory cat);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Device device_;
  MemCategory cat_;
};

class Tensor {
 public:
  Tensor() = default;  // an undefined tensor (defined() == false)

  // Uninitialised memory.
  static Tensor empty(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu(),
                      MemCategory cat = MemCategory::Activations);
  static Tensor zeros(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu(),
                      MemCategory cat = MemCategory::Activations);
  // f32 tensor filled from a host vector (tests, small constants).
  static Tensor from_vector(const std::vector<float>& v, const Shape& shape);
  static Tensor from_vector_i32(const std::vector<int32_t>& v, const Shape& shape);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const;  // negative i counts from the end
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device() : Device::cpu(); }

  void* raw() const { return static_cast<char*>(storage_->data()) + offset_bytes_; }
  template <typename T>
  T* data() const {
    return static_cast<T*>(raw());
  }
  // Typed accessors that check the dtype.
  float* f32() const;
  int32_t* i32() const;

  // Same storage, new shape with the same element count (-1 infers one dimension).
  Tensor view(const Shape& shape) const;
  // Rows [begin, end) along dim 0, sharing storage.
  Tensor slice0(int64_t begin, int64_t end) const;
  // Deep copy into new storage.
  Tensor clone(MemCategory cat = MemCategory::Activations) const;
  // Copies src's bytes into this tensor (shapes must have equal numel, dtypes equal).
  void copy_from(const Tensor& src);
  // Converted copy between f32, bf16 and f16 (same dtype: a plain clone).
  Tensor to(DType dtype, MemCategory cat = MemCategory::Activations) const;
  void zero_();
  void fill_(float v);  // f32 only

  bool same_storage(const Tensor& o) const { return storage_ == o.storage_; }
  std::string str() const;  // "f32[2, 3] cpu"

 private:
  std::shared_ptr<Storage> storage_;
  size_t offset_bytes_ = 0;
  Shape shape_;
  DType dtype_ = DType::F32;
};

// Checks used by kernels: throw braid::Error naming the argument.
void check_shape(const Tensor& t, const Shape& expected, const char* name);
void check_dtype(const Tensor& t, DType expected, const char* name);

}  // namespace braid
