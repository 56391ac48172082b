// The CUDA runtime behind core/kernels/cuda/runtime.h (built with the CUDA backend).
#include "core/kernels/cuda/runtime.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <cstdio>

#include "core/kernels/cuda/cuda_check.h"

#ifndef BRAID_CUDA_ARCHS
#define BRAID_CUDA_ARCHS "unknown"
#endif

namespace braid::cuda {

namespace {
cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }
cudaEvent_t as_event(void* e) { return static_cast<cudaEvent_t>(e); }
}  // namespace

BuildInfo build_info() {
  BuildInfo b;
  b.built = true;
  b.runtime = fmt::format("{}.{}", CUDART_VERSION / 1000, (CUDART_VERSION % 1000) / 10);
  b.archs = BRAID_CUDA_ARCHS;
  b.libraries = "cuBLASLt";
  return b;
}

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver / no device" error
    return 0;
  }
  return n;
}

std::string unavailable_reason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return fmt::format("the CUDA runtime finds no usable GPU: {}", cudaGetErrorString(e));
  }
  if (n == 0) return "no GPU is visible (check CUDA_VISIBLE_DEVICES and the driver)";
  return "";
}

std::string DeviceProps::str() const {
  return fmt::format("{} (sm_{}{}, {:.1f} GiB, {} SMs)", name, major, minor,
                     static_cast<double>(total_bytes) / (1024.0 * 1024.0 * 1024.0),
                     multiprocessors);
}

DeviceProps device_props(int index) {
  cudaDeviceProp p{};
  CUDA_CHECK(cudaGetDeviceProperties(&p, index));
  DeviceProps d;
  d.index = index;
  d.name = p.name;
  std::string uuid = "GPU-";
  for (int i = 0; i < 16; ++i) {
    uuid += fmt::format("{:02x}", static_cast<unsigned char>(p.uuid.bytes[i]));
    if (i == 3 || i == 5 || i == 7 || i == 9) uuid += '-';
  }
  d.uuid = uuid;
  d.pci_bus = fmt::format("{:04x}:{:02x}:{:02x}.0", p.pciDomainID, p.pciBusID, p.pciDeviceID);
  d.major = p.major;
  d.minor = p.minor;
  d.multiprocessors = p.multiProcessorCount;
  d.total_bytes = p.totalGlobalMem;
  return d;
}

void set_device(int index) { CUDA_CHECK(cudaSetDevice(index)); }

int current_device() {
  int d = 0;
  CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

void* stream_create() {
  cudaStream_t s = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return s;
}
void stream_destroy(void* stream) {
  if (stream) cudaStreamDestroy(as_stream(stream));  // in destructors: never throws
}
void stream_synchronize(void* stream) { CUDA_CHECK(cudaStreamSynchronize(as_stream(stream))); }

void* event_create() {
  cudaEvent_t e = nullptr;
  CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}
void event_destroy(void* event) {
  if (event) cudaEventDestroy(as_event(event));
}
void event_record(void* event, void* stream) {
  CUDA_CHECK(cudaEventRecord(as_event(event), as_stream(stream)));
}
void stream_wait_event(void* stream, void* event) {
  CUDA_CHECK(cudaStreamWaitEvent(as_stream(stream), as_event(event), 0));
}
bool event_query(void* event) {
  const cudaError_t e = cudaEventQuery(as_event(event));
  if (e == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  CUDA_CHECK(e);
  return true;
}
void event_synchronize(void* event) { CUDA_CHECK(cudaEventSynchronize(as_event(event))); }
void* timing_event_create() {
  cudaEvent_t e = nullptr;
  CUDA_CHECK(cudaEventCreate(&e));
  return e;
}
float event_elapsed_ms(void* start, void* end) {
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, as_event(start), as_event(end)));
  return ms;
}
void device_synchronize() { CUDA_CHECK(cudaDeviceSynchronize()); }

void* malloc_device(size_t bytes) {
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky, but clear it so the next check does not see it
    return nullptr;
  }
  CUDA_CHECK(e);
  return p;
}
void free_device(void* p) {
  if (p) cudaFree(p);
}
void mem_get_info(size_t* free_bytes, size_t* total_bytes) {
  CUDA_CHECK(cudaMemGetInfo(free_bytes, total_bytes));
}
void* malloc_pinned(size_t bytes) {
  void* p = nullptr;
  CUDA_CHECK(cudaMallocHost(&p, bytes));
  return p;
}
void free_pinned(void* p) {
  if (p) cudaFreeHost(p);
}

void copy_async(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, as_stream(stream)));
}
void copy_sync(void* dst, const void* src, size_t bytes) {
  if (!bytes) return;
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
  CUDA_CHECK(cudaDeviceSynchronize());
}
void memset_async(void* dst, int value, size_t bytes, void* stream) {
  if (bytes) CUDA_CHECK(cudaMemsetAsync(dst, value, bytes, as_stream(stream)));
}
void memset_sync(void* dst, int value, size_t bytes) {
  if (!bytes) return;
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaMemset(dst, value, bytes));
  CUDA_CHECK(cudaDeviceSynchronize());
}
bool is_device_pointer(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

}  // namespace braid::cuda
