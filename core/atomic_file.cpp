// AtomicFileWriter: temp file, fsync, rename, fsync of the directory.
#include "core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace braid {

namespace {
std::string parent_dir(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}
}  // namespace

AtomicFileWriter::AtomicFileWriter(std::string path)
    : path_(std::move(path)), tmp_path_(path_ + ".tmp") {
  fd_ = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) user_error("cannot create {}: {}", tmp_path_, std::strerror(errno));
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_path_.c_str());
  }
}

void AtomicFileWriter::write(const void* data, size_t bytes) {
  BRAID_CHECK(fd_ >= 0, "write to {} after commit", path_);
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, p, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      user_error("cannot write {}: {}", tmp_path_, std::strerror(errno));
    }
    p += n;
    bytes -= static_cast<size_t>(n);
    written_ += static_cast<size_t>(n);
  }
}

void AtomicFileWriter::write_at(size_t offset, const void* data, size_t bytes) {
  BRAID_CHECK(fd_ >= 0, "write to {} after commit", path_);
  BRAID_CHECK(offset <= written_ && bytes <= written_ - offset,
              "write_at [{}, {}) of {} goes past the {} bytes written", offset, offset + bytes,
              path_, written_);
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::pwrite(fd_, p, bytes, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      user_error("cannot write {}: {}", tmp_path_, std::strerror(errno));
    }
    p += n;
    offset += static_cast<size_t>(n);
    bytes -= static_cast<size_t>(n);
  }
}

void AtomicFileWriter::commit() {
  BRAID_CHECK(fd_ >= 0, "commit of {} twice", path_);
  if (::fsync(fd_) != 0) user_error("cannot flush {} to disk: {}", tmp_path_, std::strerror(errno));
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp_path_.c_str());
    user_error("cannot close {}: {}", tmp_path_, std::strerror(err));
  }
  if (std::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp_path_.c_str());
    user_error("cannot rename {} to {}: {}", tmp_path_, path_, std::strerror(err));
  }
  fsync_dir(parent_dir(path_));
}

void write_file_atomic(const std::string& path, const std::string& text) {
  AtomicFileWriter w(path);
  w.write(text.data(), text.size());
  w.commit();
}

void fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) user_error("cannot open directory {}: {}", dir, std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  // Some file systems refuse fsync on directories (EINVAL); the rename is still done.
  if (rc != 0 && err != EINVAL) user_error("cannot flush directory {}: {}", dir, std::strerror(err));
}

}  // namespace braid
