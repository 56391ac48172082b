// A GPU's device profile from what `braid plan --calibrate --device cuda` measured: the
// assembly is a pure function of the measurements (launch/calibrate/ runs the probes), so it is
// tested without a GPU.
#pragma once

#include <string>

#include "core/device.h"
#include "launch/plan/plan_types.h"

namespace braid::plan {

// The device `--calibrate --device` names: cpu, cuda (cuda:0) or cuda:N. Throws UserError
// naming the value and the valid spellings.
Device parse_calibrate_device(const std::string& value);

// What one GPU calibration measured.
struct GpuMeasurements {
  int index = 0;             // cuda:N
  std::string device_name;   // cudaGetDeviceProperties: "NVIDIA H200"
  int major = 0, minor = 0;  // compute capability
  int multiprocessors = 0;
  double total_bytes = 0;  // cudaMemGetInfo at the start of the calibration
  double free_bytes = 0;
  int gpus_visible = 1;
  int gemm_size = 0;  // edge of the square GEMMs
  double gemm_f32_flops = 0, gemm_bf16_flops = 0;  // FLOP/s achieved
  double copy_bytes = 0;            // size of the device-to-device copy
  double copy_bytes_per_s = 0;      // bytes read + written per second
  CpuProfile kernels;               // braid's kernel rates, by group and shape
  std::string timing;               // how long and in how many rounds (the profile's source)
};

// The built-in GPU kind a device name reports (cudaGetDeviceProperties' name and total memory:
// "NVIDIA H100 80GB HBM3" is h100-sxm, "NVIDIA H100 PCIe" h100-pcie, "NVIDIA H100 NVL"
// h100-nvl, "NVIDIA A100-SXM4-40GB" a100-40gb), or null when none matches. Also what MFU
// divides by on a GPU (launch/report/peak_cache.h).
const GpuSpec* table_gpu_for_device(const std::string& device_name, double total_gib);

// The profile: the device's name and memory; the measured f32/bf16 GEMM rates (TFLOP/s) and
// copy bandwidth (GB/s) as the peaks, at matmul_efficiency 1 (they are achieved rates); the
// kernel tables as measured; the links (intra/inter-node GB/s, GPUs per node, the attention
// kernel's speed-up) from the built-in table's entry for the card, or 0 when the card is not
// in it (the description says which, so --intra-bw/--inter-bw can be given). Marked
// device "cuda", so --compare refuses it against a CPU run.
DeviceProfile gpu_profile_from_measurements(const GpuMeasurements& m);

}  // namespace braid::plan
