// RunLock: flock(LOCK_EX | LOCK_NB) on <run_dir>/.lock; the holder's PID is the file's content.
#include "launch/train/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "core/error.h"

namespace braid {

namespace {

// The PID a holder wrote, or "unknown" while it has not written it yet.
std::string read_holder(int fd) {
  char buf[32] = {};
  const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  std::string s = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s.empty() ? "unknown" : s;
}

}  // namespace

RunLock::RunLock(const std::string& run_dir) : path_(run_dir + "/.lock") {
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) user_error("cannot open the run lock {}: {}", path_, std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string holder = err == EWOULDBLOCK ? read_holder(fd_) : "";
    ::close(fd_);
    fd_ = -1;
    if (err == EWOULDBLOCK)
      user_error(
          "{} is in use by another braid train (pid {}); wait for it to end or stop it "
          "(kill -TERM {} checkpoints and exits), or use another run.name",
          run_dir, holder, holder);
    user_error("cannot lock {}: {}", path_, std::strerror(err));
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  // Best effort: the lock itself is what excludes; the PID only makes the message useful.
  [[maybe_unused]] const bool wrote =
      ::ftruncate(fd_, 0) == 0 && ::pwrite(fd_, pid.data(), pid.size(), 0) > 0;
}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the flock
}

}  // namespace braid
