#include "hangscope/common/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "hangscope/common/error.h"
#include "hangscope/common/text.h"

namespace hangscope {

FileRead read_file(const std::string& path, std::size_t max_bytes) {
  FileRead result;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    result.error = errno;
    return result;
  }
  std::string text;
  char buffer[8192];
  while (text.size() < max_bytes) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      result.error = errno;
      ::close(fd);
      return result;
    }
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  if (text.size() > max_bytes) text.resize(max_bytes);
  result.text = std::move(text);
  return result;
}

namespace {

// Closes a descriptor on every path out.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "is a directory";
  if (S_ISFIFO(mode)) return "is a FIFO, not a regular file";
  if (S_ISCHR(mode)) return "is a character device, not a regular file";
  if (S_ISBLK(mode)) return "is a block device, not a regular file";
  if (S_ISSOCK(mode)) return "is a socket, not a regular file";
  return "is not a regular file";
}

}  // namespace

std::string describe_size(std::size_t bytes) {
  char text[64];
  std::snprintf(text, sizeof text, "%.1f MiB (%zu bytes)",
                static_cast<double>(bytes) / (1024.0 * 1024.0), bytes);
  return text;
}

// A pipe read to its end, refused past max_bytes.
static std::string read_pipe(const std::string& path, const std::string& name,
                             std::size_t max_bytes) {
  // Opened again, blocking: a named pipe is read once its writer has opened it (`<(command)`
  // has one already); with no writer yet, the first open would read an end of file.
  const FileDescriptor reopened(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (reopened.get() < 0) throw_errno(name, errno);
  const int fd = reopened.get();
  std::string bytes;
  char buffer[65536];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno(name, errno);
    if (n == 0) return bytes;
    bytes.append(buffer, static_cast<std::size_t>(n));
    if (bytes.size() > max_bytes) {
      throw Error(name + ": more than " + describe_size(max_bytes) + " (--max-input-mib)");
    }
  }
}

std::string read_input_file(const std::string& path, const std::string& what, std::size_t max_bytes,
                            InputKind kind) {
  const std::string name = what + " " + printable(path);
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused (or read) below.
  const FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) throw_errno(name, errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw_errno(name, errno);
  if (S_ISFIFO(st.st_mode) && kind == InputKind::kFileOrPipe) {
    return read_pipe(path, name, max_bytes);
  }
  if (!S_ISREG(st.st_mode)) throw Error(name + ": " + file_kind(st.st_mode));
  const auto size = static_cast<std::size_t>(st.st_size);
  if (size > max_bytes) {
    throw Error(name + ": " + describe_size(size) + " is over the limit of " +
                describe_size(max_bytes) + " (--max-input-mib)");
  }
  std::string bytes(size, '\0');
  std::size_t used = 0;
  while (used < size) {  // a file that shrinks while read ends early; one that grows is cut
    const ssize_t n = ::read(fd.get(), bytes.data() + used, size - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno(name, errno);
    if (n == 0) break;
    used += static_cast<std::size_t>(n);
  }
  bytes.resize(used);
  return bytes;
}

std::optional<std::vector<std::string>> list_directory(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return std::nullopt;
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace hangscope
