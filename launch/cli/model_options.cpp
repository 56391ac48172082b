// --device and --dtype of the commands that run a trained model, and loading it where they say.
#include <cstdio>

#include "launch/cli/commands.h"
#include "launch/train/exec_setup.h"

namespace braid {

void add_model_options(CLI::App* c, ModelOptions& o) {
  c->add_option(
       "--device", o.device,
       "auto (a GPU when this build has every CUDA kernel and one is visible), cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  c->add_option("--dtype", o.dtype,
                "The weights' element type, which the activations follow: auto (bf16 on a GPU, "
                "fp32 on the CPU), fp32, bf16 or fp16. The model is read in fp32 on the host and "
                "converted tensor by tensor")
      ->check(CLI::IsMember({"auto", "fp32", "bf16", "fp16"}));
}

LoadedModel load_model(const std::string& path, const ModelOptions& o, bool apply_adapter) {
  const DeviceDecision dev =
      choose_device(parse_enum<DeviceChoice>("--device", o.device), "--device");
  if (!dev.device.is_cpu()) std::fprintf(stderr, "device %s\n", dev.reason.c_str());
  return load_model(path, dev.device, apply_adapter,
                    inference_dtype(o.dtype, dev.device, "--dtype"));
}

}  // namespace braid
