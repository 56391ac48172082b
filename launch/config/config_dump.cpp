// Writing a RunConfig back as YAML (every key, exact values), atomically, and diffing two.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "launch/config/config.h"
#include "launch/config/config_schema.h"

namespace braid {

std::string dump_run_config(const RunConfig& cfg) {
  RunConfig copy = cfg;  // the field list needs a mutable config; nothing is changed
  std::string out =
      "# braid resolved config: every key of every section, so this file reproduces the run.\n";
  std::string section;
  for (const auto& f : list_config_fields(copy)) {
    if (f.section != section) {
      section = f.section;
      out += section + ":\n";
    }
    out += fmt::format("  {}: {}\n", f.key, format_field(f.ptr));
  }
  return out;
}

void save_run_config(const RunConfig& cfg, const std::filesystem::path& path) {
  const std::string text = dump_run_config(cfg);
  // Written next to the target and renamed over it, so a reader never sees half a file.
  const std::filesystem::path tmp = path.string() + fmt::format(".tmp.{}", ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) user_error("cannot write config '{}': {}", tmp.string(), std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      user_error("cannot write config '{}': {}", tmp.string(), std::strerror(err));
    }
    done += size_t(n);
  }
  const bool synced = ::fsync(fd) == 0;
  const int sync_err = errno;
  if (::close(fd) != 0 || !synced) {
    ::unlink(tmp.c_str());
    user_error("cannot write config '{}': {}", tmp.string(),
               std::strerror(synced ? errno : sync_err));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    ::unlink(tmp.c_str());
    user_error("cannot move config '{}' to '{}': {}", tmp.string(), path.string(), ec.message());
  }
}

std::vector<std::string> config_differences(const RunConfig& a, const RunConfig& b) {
  RunConfig ca = a, cb = b;
  const auto fa = list_config_fields(ca);
  const auto fb = list_config_fields(cb);
  BRAID_CHECK(fa.size() == fb.size(), "field lists differ in size");
  std::vector<std::string> diffs;
  for (size_t i = 0; i < fa.size(); ++i)
    if (!field_values_equal(fa[i].ptr, fb[i].ptr))
      diffs.push_back(fmt::format("{}: {} -> {}", fa[i].full_key(), format_field(fa[i].ptr),
                                  format_field(fb[i].ptr)));
  return diffs;
}

}  // namespace braid
