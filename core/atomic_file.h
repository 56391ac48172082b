// AtomicFileWriter: write a file so readers see either the old file or the complete new one.
#pragma once

#include <cstddef>
#include <string>

namespace braid {

// Writes to `path + ".tmp"`; commit() flushes it to disk (fsync), renames it over `path` and
// fsyncs the directory, so a crash never leaves a half-written `path`. Destroying the writer
// without commit() removes the temporary file. I/O failures throw braid::UserError naming the
// file and the system's reason (a full disk is the usual one).
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(std::string path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(const void* data, size_t bytes);
  // Overwrites bytes already written, at offset from the start of the file (pwrite), e.g. a
  // header whose counts are known only at the end. offset + bytes must be <= bytes_written()
  // (a braid::Error otherwise): it never extends the file, and the write position of write()
  // is unchanged.
  void write_at(size_t offset, const void* data, size_t bytes);
  void commit();
  size_t bytes_written() const { return written_; }

 private:
  std::string path_;
  std::string tmp_path_;
  int fd_ = -1;
  size_t written_ = 0;
};

// The whole of `text` as the new content of `path`, atomically.
void write_file_atomic(const std::string& path, const std::string& text);

// fsync a directory so renames and creations inside it survive a crash.
void fsync_dir(const std::string& dir);

}  // namespace braid
