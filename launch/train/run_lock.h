// RunLock: one writer per run directory (an exclusive flock on <run_dir>/.lock).
#pragma once

#include <string>

namespace braid {

// Holds an exclusive, non-blocking flock on <run_dir>/.lock for its lifetime and writes this
// process's PID into the file. A second `braid train` on the same run directory would
// otherwise interleave checkpoint saves and rewrite config.yaml under the first; it is refused
// with a braid::UserError naming the holder's PID. The kernel drops the lock when the process
// dies (even by kill -9), so a stale .lock file never blocks a later run.
class RunLock {
 public:
  explicit RunLock(const std::string& run_dir);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace braid
