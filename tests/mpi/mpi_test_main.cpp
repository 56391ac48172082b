// gtest main for the tests that run under mpirun: one World per process for all tests.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "tests/mpi/mpi_test_util.h"

namespace braid::test {
namespace {
World* g_world = nullptr;
}
World& world() { return *g_world; }
}  // namespace braid::test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  braid::WorldOptions opts;
  // Well below the ctest TIMEOUT, so a hang ends with braid's message, not ctest's kill.
  opts.timeout_s = 60;
  opts.init_timeout_s = 60;
  // BRAID_TEST_NONBLOCKING=1 runs the same tests with the non-blocking collective path.
  const char* nb = std::getenv("BRAID_TEST_NONBLOCKING");
  opts.blocking_collectives = !(nb && std::string(nb) == "1");
  braid::World world(&argc, &argv, opts);
  braid::test::g_world = &world;
  int rc = RUN_ALL_TESTS();
  braid::test::g_world = nullptr;
  return rc;
}
