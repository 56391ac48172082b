// GPU placement from the local rank.
#include "parallel/gpu_placement.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace braid {

namespace {
int visible_entries(const std::string& list) {
  if (list.empty()) return 0;
  return 1 + static_cast<int>(std::count(list.begin(), list.end(), ','));
}
}  // namespace

GpuPlacement place_gpu(const GpuPlacementInput& in) {
  GpuPlacement p;
  if (in.local_rank) {
    p.local_rank = *in.local_rank;
    p.local_size = in.local_size.value_or(p.local_rank + 1);
    p.how = fmt::format("local rank {} of {} (launcher)", p.local_rank, p.local_size);
  } else {
    BRAID_CHECK(in.world_rank >= 0 && in.world_rank < static_cast<int>(in.hostnames.size()),
                "GPU placement: world rank {} but {} host names", in.world_rank,
                in.hostnames.size());
    const std::string& me = in.hostnames[static_cast<size_t>(in.world_rank)];
    p.local_rank = static_cast<int>(
        std::count(in.hostnames.begin(), in.hostnames.begin() + in.world_rank, me));
    p.local_size = static_cast<int>(std::count(in.hostnames.begin(), in.hostnames.end(), me));
    p.how = fmt::format("local rank {} of {} (host names)", p.local_rank, p.local_size);
  }
  const std::string cvd = in.cuda_visible_devices.value_or("");
  const std::string shown =
      in.cuda_visible_devices ? "CUDA_VISIBLE_DEVICES=" + cvd : "CUDA_VISIBLE_DEVICES unset";
  if (in.visible_gpus < 1)
    user_error("rank {} on host {}: no GPU is visible ({}); a GPU run needs one GPU per rank",
               in.world_rank, in.hostname, shown);
  if (in.cuda_visible_devices && visible_entries(cvd) == 1 && in.visible_gpus == 1) {
    p.device = 0;  // the launcher bound this rank to its own GPU
    p.how += ", one GPU per rank by " + shown;
    return p;
  }
  if (p.local_size > in.visible_gpus)
    user_error(
        "host {} runs {} ranks but sees {} GPU{} ({}); start at most {} rank{} per node (e.g. "
        "mpirun --map-by ppr:{}:node, or srun --ntasks-per-node={}), or make more GPUs visible",
        in.hostname, p.local_size, in.visible_gpus, in.visible_gpus == 1 ? "" : "s", shown,
        in.visible_gpus, in.visible_gpus == 1 ? "" : "s", in.visible_gpus, in.visible_gpus);
  p.device = p.local_rank;
  return p;
}

std::vector<std::string> all_gather_hostnames(Communicator& world, const std::string& hostname) {
  constexpr int64_t kBytes = 256;  // HOST_NAME_MAX is 64 on Linux; room to spare
  BRAID_CHECK(static_cast<int64_t>(hostname.size()) < kBytes, "host name '{}' is too long",
              hostname);
  Tensor mine = Tensor::zeros({kBytes / 4}, DType::I32);
  std::memcpy(mine.raw(), hostname.data(), hostname.size());
  Tensor all = Tensor::zeros({kBytes / 4 * world.size()}, DType::I32);
  world.all_gather(mine, all).wait();
  std::vector<std::string> out;
  for (int r = 0; r < world.size(); ++r) {
    const char* p = static_cast<const char*>(all.raw()) + r * kBytes;
    out.emplace_back(p, strnlen(p, kBytes));
  }
  return out;
}

}  // namespace braid
