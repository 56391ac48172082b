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
// `s` with its last dimension set to `last` (a linear layer's output shape from its input's).
inline Shape with_last(Shape s, int64_t last) {
  s.back() = last;
  return s;
}

// Owns one allocation from an allocator it keeps alive. Tensors share it through shared_ptr.
class Storage {
 public:
  Storage(size_t bytes, std::shared_ptr<Allocator> allocator, MemCategory cat);
  // A storage without memory (a meta tensor's): the allocator it would come from, no bytes.
  Storage(std::shared_ptr<Allocator> allocator, MemCategory cat);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return allocator_->device(); }
  const std::shared_ptr<Allocator>& allocator() const { return allocator_; }
  MemCategory category() const { return cat_; }
  bool meta() const { return meta_; }

 private:
  bool meta_ = false;
  void* data_ = nullptr;
  size_t bytes_ = 0;
  std::shared_ptr<Allocator> allocator_;
  MemCategory cat_;
};

class Tensor {
 public:
  Tensor() = default;  // an undefined tensor (defined() == false)

  // Uninitialised memory from `allocator` (on its device).
  static Tensor empty(std::shared_ptr<Allocator> allocator, const Shape& shape, DType dtype,
                      MemCategory cat);
  // A meta tensor: shape, dtype and the allocator its memory will come from, but no memory
  // (a model built before its weights are read, core/models/layers.h's DeferredWeights). Its
  // shape can be used and new_* tensors made from it; its data cannot be read or written.
  static Tensor meta(std::shared_ptr<Allocator> allocator, const Shape& shape, DType dtype,
                     MemCategory cat);
  bool is_meta() const { return storage_ && storage_->meta(); }
  // Host tensors outside any context (data batches, files, constants): plain_host_allocator(),
  // not counted in any context's memory figures.
  static Tensor empty(const Shape& shape, DType dtype = DType::F32);
  static Tensor zeros(const Shape& shape, DType dtype = DType::F32);
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

  // A new tensor from the same allocator (same device): how kernels and layers allocate
  // outputs beside their inputs.
  Tensor new_empty(const Shape& shape, DType dtype,
                   MemCategory cat = MemCategory::Activations) const;
  Tensor new_zeros(const Shape& shape, DType dtype,
                   MemCategory cat = MemCategory::Activations) const;
  Tensor new_empty(const Shape& shape) const { return new_empty(shape, dtype_); }
  const std::shared_ptr<Allocator>& allocator() const;

  // Same storage, new shape with the same element count (-1 infers one dimension).
  Tensor view(const Shape& shape) const;
  // Rows [begin, end) along dim 0, sharing storage.
  Tensor slice0(int64_t begin, int64_t end) const;
  // Deep copy into new storage from the same allocator (same device).
  Tensor clone(MemCategory cat = MemCategory::Activations) const;
  // Copies src's bytes into this tensor (shapes must have equal numel, dtypes equal), between
  // any two of host and device memory. A copy that touches device memory waits for the whole
  // device before and after (safe against work on any stream; for set-up, checkpoints and
  // tests: a training step's copies go on the context's stream).
  void copy_from(const Tensor& src);
  // A copy in memory from `allocator` (on its device): host -> device, device -> host.
  Tensor to(const std::shared_ptr<Allocator>& allocator,
            MemCategory cat = MemCategory::Activations) const;
  // This tensor if it is on the host, else a host copy (outside any context's counters).
  Tensor to_host() const;
  // Converted copy between f32, bf16 and f16 (same dtype: a plain clone), on the same device.
  Tensor to(DType dtype, MemCategory cat = MemCategory::Activations) const;
  // Fills on either device (synchronous, like copy_from).
  void zero_();
  void fill_(float v);  // f32 only

  bool same_storage(const Tensor& o) const { return storage_ == o.storage_; }
  // Observes the storage without keeping it alive (selective recomputation's stash hook).
  std::weak_ptr<const Storage> weak_storage() const { return storage_; }
  std::string str() const;  // "f32[2, 3] cpu"

 private:
  // Shape and dtype checked and set, no storage yet.
  static Tensor unbacked(const Shape& shape, DType dtype);
  std::shared_ptr<Storage> storage_;
  size_t offset_bytes_ = 0;
  Shape shape_;
  DType dtype_ = DType::F32;
};

// Outputs beside an input: same allocator, device and dtype (empty_like) or shape too.
inline Tensor empty_like(const Tensor& t, MemCategory cat = MemCategory::Activations) {
  return t.new_empty(t.shape(), t.dtype(), cat);
}
inline Tensor zeros_like(const Tensor& t, MemCategory cat = MemCategory::Activations) {
  return t.new_zeros(t.shape(), t.dtype(), cat);
}

// Checks used by kernels: throw braid::Error naming the argument.
void check_shape(const Tensor& t, const Shape& expected, const char* name);
void check_dtype(const Tensor& t, DType expected, const char* name);

}  // namespace braid
