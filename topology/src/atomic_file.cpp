#include "atomic_file.hpp"

#include <fcntl.h>
#include <sys/file.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

namespace pipette {

std::string system_error(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

Result<std::string> read_whole_file(const std::string& label, const std::string& path, const std::string& fix) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::string message = label + path + ": cannot open (" + std::strerror(errno) + ')';
    if (!fix.empty()) message.append("; ").append(fix);
    return Error{message};
  }
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) return Error{label + path + ": read error"};
  return contents.str();
}

Result<TemporaryFile> write_temporary(const std::string& target_path, const std::string& contents, mode_t mode) {
  const std::filesystem::path target(target_path);
  const std::string directory = target.has_parent_path() ? target.parent_path().string() : ".";
  TemporaryFile file;
  file.path = (std::filesystem::path(directory) / ('.' + target.filename().string() + ".tmp.XXXXXX")).string();
  FileDescriptor fd(::mkstemp(file.path.data()));
  if (fd.get() < 0) return Error{system_error("cannot create a temporary file in", directory) + " (is the directory writable?)"};
  auto fail = [&](const std::string& what) {
    const Error error{system_error(what, file.path)};
    ::unlink(file.path.c_str());
    return error;
  };
  if (::fchmod(fd.get(), mode) != 0) return fail("cannot chmod");
  for (std::size_t written = 0; written < contents.size();) {
    const ssize_t n = ::write(fd.get(), contents.data() + written, contents.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail("cannot write");
    written += static_cast<std::size_t>(n);
  }
  if (::fsync(fd.get()) != 0) return fail("cannot fsync");
  if (::fstat(fd.get(), &file.status) != 0) return fail("cannot stat");
  if (::close(fd.release()) != 0) return fail("cannot close");
  return file;
}

std::optional<Error> rename_over(const TemporaryFile& file, const std::string& target_path) {
  if (::rename(file.path.c_str(), target_path.c_str()) != 0) {
    const Error error{system_error("cannot rename onto " + target_path + " from", file.path)};
    ::unlink(file.path.c_str());
    return error;
  }
  const std::filesystem::path target(target_path);
  const std::string directory = target.has_parent_path() ? target.parent_path().string() : ".";
  FileDescriptor directory_fd(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (directory_fd.get() >= 0) ::fsync(directory_fd.get());  // best effort: the rename is already visible
  return std::nullopt;
}

Result<FileDescriptor> lock_beside(const std::string& path) {
  const std::string lock_path = path + ".lock";
  FileDescriptor lock(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (lock.get() < 0) return Error{system_error("cannot open the lock file", lock_path)};
  if (::flock(lock.get(), LOCK_EX) != 0) return Error{system_error("cannot lock", lock_path)};
  return lock;
}

}  // namespace pipette
