// A small job that fails on purpose, for tests/mpi/failure.sh: rank 1 throws mid-step, is
// killed with SIGKILL, or never joins a collective, while the others wait in an all-reduce; or
// never reaches start-up's communicator creation (no_mesh).
//   braid_mpi_failure <throw|kill|absent|no_mesh> <timeout_s>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "core/error.h"
#include "parallel/world.h"

namespace {

void run(braid::World& world, const std::string& mode) {
  if (mode == "no_mesh") {  // rank 1 never reaches start-up's communicator creation
    if (world.rank() == 1)
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    world.build_mesh(braid::Mesh::resolve(0, 1, 1, world.size()));
  }
  braid::Communicator& c = world.world();
  braid::Tensor x = braid::Tensor::zeros({1 << 16});
  for (int step = 0; step < 3; ++step) {
    if (step == 2 && world.rank() == 1) {
      if (mode == "throw") throw braid::Error("injected failure on rank 1 in step 2");
      if (mode == "kill") std::raise(SIGKILL);
      if (mode == "absent")
        for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    c.all_reduce(x, braid::ReduceOp::Sum).wait();
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s <throw|kill|absent|no_mesh> <timeout_s>\n", argv[0]);
    return 2;
  }
  std::string mode = argv[1];
  braid::WorldOptions opts;
  opts.timeout_s = std::atof(argv[2]);
  opts.init_timeout_s = opts.timeout_s;
  int rank = -1;
  try {
    braid::World world(&argc, &argv, opts);
    rank = world.rank();
    run(world, mode);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "braid: rank %d: error: %s\n", rank, e.what());
    return 1;
  }
  return 0;
}
