// RunLock: a second holder of one run directory is refused with the first one's PID.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "core/error.h"
#include "launch/train/run_lock.h"

namespace braid {
namespace {

namespace fs = std::filesystem;

TEST(RunLock, SecondWriterRefusedWithHolderPid) {
  const fs::path dir = fs::temp_directory_path() / ("braid_lock_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  {
    RunLock first(dir.string());
    // flock belongs to the open file description, so a second open() in this same process
    // conflicts exactly as another process would.
    try {
      RunLock second(dir.string());
      FAIL() << "a second lock on one run directory was granted";
    } catch (const UserError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("pid " + std::to_string(::getpid())), std::string::npos) << msg;
      EXPECT_NE(msg.find(dir.string()), std::string::npos) << msg;
    }
  }
  // Released with its holder; the stale .lock file does not block the next run.
  EXPECT_TRUE(fs::exists(dir / ".lock"));
  EXPECT_NO_THROW(RunLock again(dir.string()));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace braid
