// run_train: the single-process path or World + mesh + data-parallel training; the test hook.
#include "launch/dist_run.h"

#include <csignal>
#include <cstdlib>
#include <thread>

#include "launch/trainer.h"
#include "parallel/launch_info.h"

namespace braid {

void read_fail_hook(DistRun& d) {
  const char* v = std::getenv("BRAID_TEST_FAIL_AT_STEP");
  if (!v || !*v) return;
  const std::string s = v;
  char mode[16] = "throw";
  long long rank = -1, step = 0;
  const int n = std::sscanf(s.c_str(), "%lld:%lld:%15s", &rank, &step, mode);
  const std::string m = mode;
  BRAID_USER_CHECK(
      n >= 2 && rank >= 0 && step >= 1 &&
          (m == "throw" || m == "kill" || m == "hang" || m == "kill_at_save"),
      "BRAID_TEST_FAIL_AT_STEP is '{}'; expected rank:step[:throw|kill|hang|kill_at_save]", s);
  d.fail_rank = static_cast<int>(rank);
  d.fail_step = step;
  d.fail_mode = m;
}

void maybe_fail(const DistRun& d, int64_t step, bool saving) {
  if (d.fail_rank != d.rank() || d.fail_step != step) return;
  if ((d.fail_mode == "kill_at_save") != saving) return;
  if (saving) std::raise(SIGKILL);
  if (d.fail_mode == "kill") std::raise(SIGKILL);
  if (d.fail_mode == "hang")
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  throw Error(fmt::format("injected failure (BRAID_TEST_FAIL_AT_STEP) at step {}", step));
}

void run_train(const RunConfig& cfg, const std::string& config_path) {
  const LaunchInfo li = launch_info_from_env();
  const ParallelConfig& pc = cfg.parallel;
  if (li.world_size == 1) {
    const int dp = pc.dp_degree();
    BRAID_USER_CHECK((dp == 0 || dp == 1) && pc.tp == 1 && pc.pp == 1,
                     "parallel.dp={} tp={} pp={} need {} ranks but braid train runs as one "
                     "process; start it with mpirun -np N (see docs/guide.md), or set "
                     "parallel.dp=auto",
                     dp == 0 ? std::string("auto") : std::to_string(dp), pc.tp, pc.pp,
                     (dp == 0 ? 1 : dp) * pc.tp * pc.pp);
    train(cfg, config_path);
    return;
  }
  WorldOptions wo;
  wo.timeout_s = pc.timeout_s;
  wo.init_timeout_s = pc.init_timeout_s;
  World world(nullptr, nullptr, wo);
  try {
    DistRun d;
    d.world = &world;
    d.mesh = Mesh::resolve(pc.dp_degree(), pc.tp, pc.pp, world.size());
    const MeshComms comms = world.build_mesh(d.mesh);
    d.coord = comms.coord;
    d.dp = comms.dp;
    d.tp = comms.tp;
    d.pp = comms.pp;
    d.embedding = comms.embedding;
    read_fail_hook(d);
    train(cfg, config_path, &d);
  } catch (const std::exception& e) {
    // The others may be inside a collective with this rank: end the whole job now, naming
    // the rank, instead of leaving them to the timeout.
    world.abort_job(fmt::format("braid train: rank {}: error: {}", world.rank(), e.what()));
  }
}

}  // namespace braid
