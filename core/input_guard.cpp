// Regular-file opens and the JSON nesting scan.
#include "core/input_guard.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace braid {

void check_json_depth(std::string_view text, const std::string& what, const std::string& path,
                      size_t max_depth) {
  size_t depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth)
        user_error(
            "{} '{}' nests JSON arrays/objects more than {} levels deep (at byte {}); "
            "braid's files nest a few levels, so the file is corrupt or hostile",
            what, path, max_depth, i);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;  // unbalanced closers are left to the parser to report
    }
  }
}

namespace {

const char* file_kind(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a named pipe";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  return "not a regular file";
}

}  // namespace

int open_regular_file(const std::string& path, std::string_view what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    const int err = errno;
    user_error("{} '{}' cannot be opened: {}", what, path, std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    user_error("{} '{}': cannot stat: {}", what, path, std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    user_error("{} '{}' is {}; expected a regular file", what, path, file_kind(st.st_mode));
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

std::string read_regular_file(const std::string& path, std::string_view what) {
  const int fd = open_regular_file(path, what);
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      user_error("error reading {} '{}': {}", what, path, std::strerror(err));
    }
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

}  // namespace braid
