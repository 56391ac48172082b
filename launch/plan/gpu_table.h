// The built-in accelerator table and device-profile JSON files (a calibrated machine).
#pragma once

#include <string>
#include <vector>

#include "launch/plan/plan_types.h"

namespace braid::plan {

// Every built-in GPU kind, in table order.
const std::vector<GpuSpec>& gpu_table();

// A built-in kind by name (case-insensitive; "a100" means the 80 GB part), or a device
// profile when `name` ends in .json (then with its CPU kernel rates). Throws UserError listing
// the valid names.
DeviceProfile find_device(const std::string& name);
// The accelerator part of find_device.
GpuSpec find_gpu(const std::string& name);
// `s` with ASCII letters in lower case: device and card names match case-insensitively.
std::string ascii_lower(std::string s);

// Peak dense TFLOP/s of `gpu` for a compute precision. Throws UserError when the GPU lacks it
// (V100 has no bf16).
double peak_tflops(const GpuSpec& gpu, Precision precision);

// Device profile JSON <-> DeviceProfile (the fields of GpuSpec by name, then the CPU tables).
DeviceProfile load_device_profile(const std::string& path);
void save_device_profile(const DeviceProfile& profile, const std::string& path);

}  // namespace braid::plan
