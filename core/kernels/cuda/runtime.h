// The CUDA runtime as braid's host code uses it: device discovery, streams, events, device and
// pinned memory, copies. Plain C++ (no CUDA headers), so core/ and launch/ call it whether or
// not the backend is built: without it (BRAID_CUDA=OFF) every query says "no GPU" and every
// operation fails with a message saying the binary has no CUDA backend
// (core/kernels/cuda_absent.cpp). Errors carry file:line and the CUDA error string.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace braid::cuda {

// What the binary was built with.
struct BuildInfo {
  bool built = false;     // the CUDA backend is compiled in
  std::string runtime;    // CUDA runtime version it was built against, "13.0"
  std::string archs;      // "sm_80 sm_86 sm_89 sm_90 sm_120 (+PTX compute_120)"
  std::string libraries;  // "cuBLASLt 13.1"
};
BuildInfo build_info();

// Number of visible GPUs; 0 without the backend, a driver or a device.
int device_count();
// Why no GPU can be used ("" when device_count() > 0): no backend, no driver, none visible.
std::string unavailable_reason();

struct DeviceProps {
  int index = 0;
  std::string name;          // "NVIDIA H200"
  std::string uuid;          // "GPU-8c1f..."
  std::string pci_bus;       // "0000:19:00.0"
  int major = 0, minor = 0;  // compute capability
  int multiprocessors = 0;
  size_t total_bytes = 0;
  std::string str() const;  // "NVIDIA H200 (sm_90, 139.8 GiB, 132 SMs)"
};
DeviceProps device_props(int index);

// The calling thread's current device.
void set_device(int index);
int current_device();

// Streams and events are opaque handles (cudaStream_t / cudaEvent_t).
void* stream_create();  // non-blocking with respect to the legacy default stream
void stream_destroy(void* stream);
void stream_synchronize(void* stream);
void* event_create();  // timing disabled: used for ordering only
void event_destroy(void* event);
void event_record(void* event, void* stream);
void stream_wait_event(void* stream, void* event);
bool event_query(void* event);  // true when the work before it is done
void event_synchronize(void* event);
void* timing_event_create();  // timing enabled: for event_elapsed_ms
// Milliseconds between two recorded timing events that have completed.
float event_elapsed_ms(void* start, void* end);
void device_synchronize();

// Device memory: null when the device is out of memory (the caller reports; the sticky error
// is cleared). Other failures throw.
void* malloc_device(size_t bytes);
void free_device(void* p);
// (free, total) bytes on the current device.
void mem_get_info(size_t* free_bytes, size_t* total_bytes);
// Page-locked host memory for asynchronous copies.
void* malloc_pinned(size_t bytes);
void free_pinned(void* p);

// Copies between any two of host and device memory (the pointers say which).
// copy_async is ordered on `stream`; copy_sync waits for the whole device before and after,
// so it is safe against work queued on any stream (checkpoints, set-up, tests).
void copy_async(void* dst, const void* src, size_t bytes, void* stream);
void copy_sync(void* dst, const void* src, size_t bytes);
void memset_async(void* dst, int value, size_t bytes, void* stream);
// Like copy_sync: waits for the whole device before and after.
void memset_sync(void* dst, int value, size_t bytes);
// True when p points to device (or managed) memory.
bool is_device_pointer(const void* p);

}  // namespace braid::cuda
