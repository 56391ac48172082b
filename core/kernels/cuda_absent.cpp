// core/kernels/cuda/runtime.h in a binary built without the CUDA backend (BRAID_CUDA=OFF):
// queries say there is no GPU and why; operations cannot be reached (no CUDA context can be
// made) and fail with that reason if they are.
#if !BRAID_WITH_CUDA
#include "core/error.h"
#include "core/kernels/cuda/cuda_kernels.h"
#include "core/kernels/cuda/runtime.h"

namespace braid::cuda {

namespace {
[[noreturn]] void absent() {
  throw UserError(
      "this braid binary was built without the CUDA backend (BRAID_CUDA=OFF); "
      "rebuild with the CUDA toolkit installed, or use device: cpu");
}
}  // namespace

BuildInfo build_info() { return {}; }
int device_count() { return 0; }
std::string unavailable_reason() {
  return "this braid binary was built without the CUDA backend (configured with BRAID_CUDA=OFF "
         "or without nvcc)";
}
std::string DeviceProps::str() const { return name; }
DeviceProps device_props(int) { absent(); }
void set_device(int) { absent(); }
int current_device() { absent(); }
void* stream_create() { absent(); }
void stream_destroy(void*) {}
void stream_synchronize(void*) { absent(); }
void* event_create() { absent(); }
void event_destroy(void*) {}
void event_record(void*, void*) { absent(); }
void stream_wait_event(void*, void*) { absent(); }
bool event_query(void*) { absent(); }
void event_synchronize(void*) { absent(); }
void* timing_event_create() { absent(); }
float event_elapsed_ms(void*, void*) { absent(); }
void device_synchronize() { absent(); }
void* malloc_device(size_t) { absent(); }
void free_device(void*) {}
void mem_get_info(size_t*, size_t*) { absent(); }
void* malloc_pinned(size_t) { absent(); }
void free_pinned(void*) {}
void copy_async(void*, const void*, size_t, void*) { absent(); }
void copy_sync(void*, const void*, size_t) { absent(); }
void memset_async(void*, int, size_t, void*) { absent(); }
void memset_sync(void*, int, size_t) { absent(); }
bool is_device_pointer(const void*) { return false; }
int pending_kernel_count() { return -1; }
void set_allow_tf32(ExecContext&, bool) {}
void set_deterministic(ExecContext&, bool) {}
void upload_small(ExecContext&, Tensor&, const Tensor&) { absent(); }

}  // namespace braid::cuda
#endif
