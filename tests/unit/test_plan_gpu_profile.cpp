// braid plan --calibrate --device cuda: the profile assembled from a GPU's measurements, the
// device spelling, and --compare refusing a profile of another kind of device than the run's.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/error.h"
#include "core/kernels/cuda/runtime.h"
#include "data_test_util.h"
#include "launch/calibrate/calibrate.h"
#include "launch/plan/compare.h"
#include "launch/plan/config_input.h"
#include "launch/plan/gpu_profile.h"
#include "launch/plan/gpu_table.h"
#include "plan_test_util.h"

namespace braid::plan {

namespace {

using braid::testing::user_error_of;

// What an H200 calibration could measure (round numbers, not a measurement).
GpuMeasurements h200() {
  GpuMeasurements m;
  m.index = 1;
  m.device_name = "NVIDIA H200";
  m.major = 9;
  m.minor = 0;
  m.multiprocessors = 132;
  m.total_bytes = 140.0 * kGiB;
  m.free_bytes = 139.5 * kGiB;
  m.gpus_visible = 1;
  m.gemm_size = 8192;
  m.gemm_f32_flops = 50e12;
  m.gemm_bf16_flops = 700e12;
  m.copy_bytes = 1024.0 * 1024 * 1024;
  m.copy_bytes_per_s = 4000e9;
  m.kernels = testing::cpu_profile(100.0).cpu;
  m.kernels.threads = 2;
  m.timing = "6 interleaved rounds";
  return m;
}

}  // namespace

TEST(PlanGpuProfile, MeasuredRatesAreTheProfilesPeaks) {
  const DeviceProfile d = gpu_profile_from_measurements(h200());
  EXPECT_EQ(d.device, "cuda");
  EXPECT_EQ(d.gpu.name, "NVIDIA H200");
  EXPECT_DOUBLE_EQ(d.gpu.memory_gib, 140.0);
  EXPECT_DOUBLE_EQ(d.gpu.tflops_fp32, 50.0);
  EXPECT_DOUBLE_EQ(d.gpu.tflops_bf16, 700.0);
  EXPECT_DOUBLE_EQ(d.gpu.tflops_fp16, 0.0);  // not measured
  EXPECT_DOUBLE_EQ(d.gpu.mem_bw_gbs, 4000.0);
  EXPECT_DOUBLE_EQ(d.gpu.matmul_efficiency, 1.0);  // achieved rates
  // The kernel tables as measured; no OpenMP thread count on a GPU.
  EXPECT_EQ(d.cpu.gemm_by_width.size(), h200().kernels.gemm_by_width.size());
  EXPECT_DOUBLE_EQ(d.cpu.gemm_by_width[1].rate, h200().kernels.gemm_by_width[1].rate);
  EXPECT_DOUBLE_EQ(d.cpu.kernel_call_us, h200().kernels.kernel_call_us);
  EXPECT_EQ(d.cpu.threads, 0);
  EXPECT_NE(d.gpu.description.find("cuda:1, sm_90, 132 SMs"), std::string::npos)
      << d.gpu.description;
  EXPECT_NE(d.gpu.source.find("8192^3"), std::string::npos) << d.gpu.source;
}

TEST(PlanGpuProfile, LinksComeFromTheTableEntryOfTheCard) {
  const DeviceProfile d = gpu_profile_from_measurements(h200());
  const GpuSpec table = find_gpu("h200");
  EXPECT_DOUBLE_EQ(d.gpu.intra_bw_gbs, table.intra_bw_gbs);
  EXPECT_DOUBLE_EQ(d.gpu.inter_bw_gbs, table.inter_bw_gbs);
  EXPECT_EQ(d.gpu.gpus_per_node, table.gpus_per_node);
  EXPECT_DOUBLE_EQ(d.gpu.native_attention_speedup, table.native_attention_speedup);
  EXPECT_NE(d.gpu.description.find("links not measured"), std::string::npos);
  EXPECT_NE(d.gpu.description.find("built-in table's h200"), std::string::npos)
      << d.gpu.description;
}

TEST(PlanGpuProfile, AnUnknownCardHasNoLinkFiguresAndSaysSo) {
  GpuMeasurements m = h200();
  m.device_name = "NVIDIA Example GPU";
  m.gpus_visible = 2;
  const DeviceProfile d = gpu_profile_from_measurements(m);
  EXPECT_DOUBLE_EQ(d.gpu.intra_bw_gbs, 0.0);
  EXPECT_DOUBLE_EQ(d.gpu.inter_bw_gbs, 0.0);
  EXPECT_EQ(d.gpu.gpus_per_node, 2);
  EXPECT_NE(d.gpu.description.find("--intra-bw"), std::string::npos) << d.gpu.description;
}

TEST(PlanGpuProfile, DeviceNamesFindTheirTableKind) {
  auto kind = [](const char* name, double gib) {
    const GpuSpec* g = table_gpu_for_device(name, gib);
    return g ? g->name : std::string("none");
  };
  EXPECT_EQ(kind("NVIDIA H200", 140), "h200");
  EXPECT_EQ(kind("NVIDIA H100 80GB HBM3", 79.6), "h100-sxm");
  EXPECT_EQ(kind("NVIDIA H100 PCIe", 79.6), "h100-pcie");
  EXPECT_EQ(kind("NVIDIA H100 NVL", 93.6), "h100-nvl");
  EXPECT_EQ(kind("NVIDIA A100-SXM4-40GB", 39.4), "a100-40gb");
  EXPECT_EQ(kind("NVIDIA A100-SXM4-80GB", 79.2), "a100-80gb");
  EXPECT_EQ(kind("NVIDIA GeForce RTX 4090", 23.6), "rtx4090");
  EXPECT_EQ(kind("NVIDIA L40S", 44.4), "l40s");
  EXPECT_EQ(kind("Tesla V100-SXM2-32GB", 31.7), "v100");
  EXPECT_EQ(kind("NVIDIA Example GPU", 16), "none");
}

TEST(PlanGpuProfile, DeviceSpellings) {
  EXPECT_TRUE(parse_calibrate_device("cpu").is_cpu());
  EXPECT_EQ(parse_calibrate_device("cuda"), Device::cuda(0));
  EXPECT_EQ(parse_calibrate_device("cuda:3"), Device::cuda(3));
  for (const char* bad : {"gpu", "cuda:", "cuda:-1", "cuda:1x", "CUDA", ""}) {
    const std::string e = user_error_of([&] { parse_calibrate_device(bad); });
    EXPECT_NE(e.find("expected cpu, cuda or cuda:N"), std::string::npos) << bad << ": " << e;
  }
}

TEST(PlanGpuProfile, TheDeviceKindSurvivesTheProfileFile) {
  braid::testing::TempDir dir{"gpu_profile"};
  const std::string path = dir.file("gpu.json");
  save_device_profile(gpu_profile_from_measurements(h200()), path);
  const DeviceProfile back = load_device_profile(path);
  EXPECT_EQ(back.device, "cuda");
  EXPECT_EQ(back.gpu.name, "NVIDIA H200");
  // A profile written before the key existed (a CPU calibration) reads as no device.
  save_device_profile(testing::cpu_profile(), path);
  EXPECT_EQ(load_device_profile(path).device, "");
}

TEST(PlanGpuProfile, CalibratingAGpuWithoutOneIsAClearError) {
  if (cuda::device_count() > 0) GTEST_SKIP() << "a GPU is visible";
  CalibrateOptions opt = CalibrateOptions::gpu("cuda");
  const std::string e = user_error_of([&] { calibrate_machine(opt); });
  EXPECT_NE(e.find("--calibrate --device cuda: no GPU can be used"), std::string::npos) << e;
}

// --compare: the profile's device against the run's (run.json's devices).
TEST(PlanGpuProfile, CompareRefusesAProfileOfAnotherDevice) {
  const DeviceProfile gpu = gpu_profile_from_measurements(h200());
  DeviceProfile cpu = testing::cpu_profile();
  RunLayout gpu_run;
  gpu_run.path = "runs/g/run.json";
  gpu_run.device = "cuda";
  gpu_run.device_detail = "cuda:0, NVIDIA H200 (sm_90, 139.8 GiB, 132 SMs) (train.device: cuda)";
  RunLayout cpu_run;
  cpu_run.path = "runs/c/run.json";
  EXPECT_EQ(check_same_device(gpu, "gpu.json", gpu_run), "");
  EXPECT_EQ(check_same_device(cpu, "cpu.json", cpu_run), "");  // an old profile: the CPU
  cpu.device = "cpu";
  EXPECT_EQ(check_same_device(cpu, "cpu.json", cpu_run), "");
  std::string e = user_error_of([&] { check_same_device(cpu, "cpu.json", gpu_run); });
  EXPECT_NE(e.find("'cpu.json' was calibrated on the CPU"), std::string::npos) << e;
  EXPECT_NE(e.find("trained on a GPU (runs/g/run.json: cuda:0, NVIDIA H200"), std::string::npos)
      << e;
  EXPECT_NE(e.find("--device cuda"), std::string::npos) << e;
  e = user_error_of([&] { check_same_device(gpu, "gpu.json", cpu_run); });
  EXPECT_NE(e.find("'gpu.json' was calibrated on a GPU (NVIDIA H200)"), std::string::npos) << e;
  EXPECT_NE(e.find("--device cpu"), std::string::npos) << e;
  // Another GPU than the run's: compared, with a note.
  gpu_run.device_detail = "cuda:0, NVIDIA A100-SXM4-80GB (sm_80, 79.2 GiB, 108 SMs)";
  EXPECT_NE(check_same_device(gpu, "gpu.json", gpu_run).find("calibrated on NVIDIA H200"),
            std::string::npos);
}

TEST(PlanGpuProfile, AveragingRefusesProfilesOfDifferentDevices) {
  DeviceProfile a = testing::cpu_profile(), b = testing::cpu_profile();
  a.device = "cpu";
  b.device = "cuda";
  const std::string e = user_error_of([&] { average_profiles({a, b}); });
  EXPECT_NE(e.find("different devices"), std::string::npos) << e;
}

TEST(PlanGpuProfile, RunLayoutReadsTheRecordedDevice) {
  braid::testing::TempDir dir{"gpu_run"};
  const auto record = [&](const std::string& devices) {
    braid::testing::write_text(
        dir.file("run.json"),
        R"({"attempts": [{"threads": 1, "parallel_layout": {"ranks": 1, "dp": 1, "tp": 1, "pp": 1,
           "zero": 0})" + devices + "}]}");
    return read_run_layout(dir.path().string());
  };
  const RunLayout gpu = record(
      R"j(, "devices": [{"rank": 0, "host": "h", "device": "cuda:0, NVIDIA H200 (sm_90)"}])j");
  EXPECT_EQ(gpu.device, "cuda");
  EXPECT_EQ(gpu.device_detail, "cuda:0, NVIDIA H200 (sm_90)");
  const RunLayout cpu =
      record(R"j(, "devices": [{"rank": 0, "host": "h", "device": "cpu (train.device: cpu)"}])j");
  EXPECT_EQ(cpu.device, "cpu");
  EXPECT_EQ(record("").device, "cpu");  // recorded before devices were
}

}  // namespace braid::plan
