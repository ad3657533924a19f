#pragma once
// Internal: how Pipette's state and record files (the link cache, the calibration file, plan and
// run records) are read whole, and how the shared ones are replaced: written in full beside the target, fsynced, then renamed over it, so a reader sees the old file
// or the new one and never a half-written one. Writers serialise with an flock on PATH.lock.
#include <sys/stat.h>
#include <unistd.h>

#include <optional>
#include <string>
#include <utility>

#include "pipette/core/result.hpp"

namespace pipette {

// "WHAT PATH: strerror(errno)".
std::string system_error(const std::string& what, const std::string& path);

// The whole file. Errors: "LABELPATH: cannot open (strerror); FIX" (no "; FIX" when fix is empty)
// and "LABELPATH: read error".
Result<std::string> read_whole_file(const std::string& label, const std::string& path, const std::string& fix = "");

// RAII file descriptor, so every error path closes what it opened.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(other.release()) {}
  FileDescriptor& operator=(FileDescriptor&&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// A fully written and fsynced file beside its target, waiting to be renamed over it.
struct TemporaryFile {
  std::string path;
  struct stat status {};
};

// `mode` is the new file's permission bits.
Result<TemporaryFile> write_temporary(const std::string& target_path, const std::string& contents, mode_t mode = 0644);
std::optional<Error> rename_over(const TemporaryFile& file, const std::string& target_path);

// An exclusive flock on PATH.lock, held until destruction; an Error names the lock file.
Result<FileDescriptor> lock_beside(const std::string& path);

}  // namespace pipette
