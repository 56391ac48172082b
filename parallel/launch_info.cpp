// Launcher environment -> LaunchInfo.
#include "parallel/launch_info.h"

#include <charconv>
#include <cstdlib>

#include "core/error.h"

namespace braid {
namespace {

// A non-negative integer variable; nullopt when unset.
std::optional<int> env_int(const EnvLookup& env, const char* name) {
  std::optional<std::string> v = env(name);
  if (!v) return std::nullopt;
  int out = 0;
  const char* end = v->data() + v->size();
  auto [ptr, ec] = std::from_chars(v->data(), end, out);
  BRAID_USER_CHECK(ec == std::errc() && ptr == end && out >= 0,
                   "environment variable {}='{}' is not a non-negative integer", name, *v);
  return out;
}

// Slurm writes SLURM_NTASKS_PER_NODE as "4" or, for uneven layouts, "4(x2),3"; the local
// size is only informational, so anything but a plain number reads as unknown (1).
int slurm_local_size(const EnvLookup& env) {
  std::optional<std::string> v = env("SLURM_NTASKS_PER_NODE");
  if (!v) return 1;
  int out = 0;
  const char* end = v->data() + v->size();
  auto [ptr, ec] = std::from_chars(v->data(), end, out);
  return (ec == std::errc() && ptr == end && out > 0) ? out : 1;
}

void check_consistent(const LaunchInfo& li, const char* rank_var, const char* size_var) {
  BRAID_USER_CHECK(li.world_size >= 1, "environment variable {} is {}; expected >= 1", size_var,
                   li.world_size);
  BRAID_USER_CHECK(li.rank < li.world_size, "environment variable {}={} is not below {}={}",
                   rank_var, li.rank, size_var, li.world_size);
}

}  // namespace

LaunchInfo launch_info_from_env(const EnvLookup& env) {
  LaunchInfo li;
  if (auto rank = env_int(env, "OMPI_COMM_WORLD_RANK")) {
    auto size = env_int(env, "OMPI_COMM_WORLD_SIZE");
    BRAID_USER_CHECK(size.has_value(),
                     "OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_SIZE is not");
    li.rank = *rank;
    li.world_size = *size;
    li.local_rank = env_int(env, "OMPI_COMM_WORLD_LOCAL_RANK").value_or(0);
    li.local_world_size = env_int(env, "OMPI_COMM_WORLD_LOCAL_SIZE").value_or(1);
    li.source = "openmpi";
    check_consistent(li, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE");
  } else if (auto rank = env_int(env, "SLURM_PROCID")) {
    auto size = env_int(env, "SLURM_NTASKS");
    BRAID_USER_CHECK(size.has_value(), "SLURM_PROCID is set but SLURM_NTASKS is not");
    li.rank = *rank;
    li.world_size = *size;
    li.local_rank = env_int(env, "SLURM_LOCALID").value_or(0);
    li.local_world_size = slurm_local_size(env);
    li.source = "slurm";
    check_consistent(li, "SLURM_PROCID", "SLURM_NTASKS");
  } else if (auto rank = env_int(env, "PMIX_RANK")) {
    const char* size_var = env("PMIX_SIZE") ? "PMIX_SIZE" : "OMPI_UNIVERSE_SIZE";
    auto size = env_int(env, size_var);
    BRAID_USER_CHECK(size.has_value(),
                     "PMIX_RANK is set but neither PMIX_SIZE nor OMPI_UNIVERSE_SIZE is");
    li.rank = *rank;
    li.world_size = *size;
    li.local_rank = env_int(env, "PMIX_LOCAL_RANK").value_or(0);
    li.local_world_size = env_int(env, "PMIX_LOCAL_SIZE").value_or(1);
    li.source = "pmix";
    check_consistent(li, "PMIX_RANK", size_var);
  }
  BRAID_USER_CHECK(li.local_rank < li.local_world_size || li.local_world_size == 1,
                   "local rank {} is not below the local size {} ({} launcher variables)",
                   li.local_rank, li.local_world_size, li.source);
  return li;
}

LaunchInfo launch_info_from_env() {
  return launch_info_from_env([](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  });
}

}  // namespace braid
