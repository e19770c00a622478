#include "hangscope/common/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <streambuf>

#include "hangscope/common/error.h"
#include "hangscope/common/text.h"

namespace hangscope {

FileDescriptor& FileDescriptor::operator=(FileDescriptor&& other) noexcept {
  if (this != &other) reset(other.release());
  return *this;
}

void FileDescriptor::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

std::string describe_file_type(mode_t mode) {
  if (S_ISREG(mode)) return "is a regular file";
  if (S_ISDIR(mode)) return "is a directory";
  if (S_ISFIFO(mode)) return "is a FIFO, not a regular file";
  if (S_ISCHR(mode)) return "is a character device, not a regular file";
  if (S_ISBLK(mode)) return "is a block device, not a regular file";
  if (S_ISSOCK(mode)) return "is a socket, not a regular file";
  if (S_ISLNK(mode)) return "is a symbolic link, which is not followed here";
  return "is not a regular file";
}

namespace {

enum class Wanted { kRegular, kFifo };

// The refusal of a file (error EPERM), or of a failed system call (its errno).
OpenedFile refused(const std::string& name, const std::string& reason) {
  OpenedFile out;
  out.name = name;
  out.error = EPERM;
  out.reason = reason;
  return out;
}

OpenedFile failed(const std::string& name, int err) {
  OpenedFile out;
  out.name = name;
  out.error = err;
  out.reason = std::strerror(err);
  return out;
}

// open_regular_file and open_fifo_for_writing: look first (O_PATH), open only what passes.
OpenedFile open_checked(const std::string& path, const std::string& what, const OpenRules& rules,
                        Wanted wanted, int access) {
  const std::string name = what + " " + printable(path);
  const int nofollow = rules.links == Links::kRefuse ? O_NOFOLLOW : 0;
  // O_PATH opens nothing: no device's open routine runs, no FIFO waits for its other end. With
  // O_NOFOLLOW a symbolic link itself is opened, and refused below by its type.
  FileDescriptor look(::open(path.c_str(), O_PATH | O_CLOEXEC | nofollow));
  if (!look) return failed(name, errno);
  struct stat st {};
  if (::fstat(look.get(), &st) != 0) return failed(name, errno);
  const bool type_ok = wanted == Wanted::kRegular ? S_ISREG(st.st_mode) : S_ISFIFO(st.st_mode);
  if (!type_ok) {
    if (wanted == Wanted::kFifo && !S_ISLNK(st.st_mode)) {
      return refused(name, S_ISREG(st.st_mode)
                               ? "is a regular file, not a FIFO"
                               : describe_file_type(st.st_mode) + " (a FIFO is expected)");
    }
    return refused(name, describe_file_type(st.st_mode));
  }
  if (rules.owner && st.st_uid != *rules.owner && st.st_uid != 0) {
    return refused(name, "belongs to uid " + std::to_string(st.st_uid) + ", neither uid " +
                             std::to_string(*rules.owner) + " (the process's) nor root");
  }
  // The inode just looked at, opened through its O_PATH descriptor: no second path lookup that
  // a rename could redirect.
  const int flags = access | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;
  FileDescriptor fd(::open(("/proc/self/fd/" + std::to_string(look.get())).c_str(), flags));
  int err = fd ? 0 : errno;
  if (err == ENOENT && ::access("/proc/self/fd", F_OK) != 0) {
    // No /proc (or another PID namespace's): the path again, and the same inode required.
    fd.reset(::open(path.c_str(), flags | nofollow));
    err = fd ? 0 : errno;
    struct stat again {};
    if (fd && (::fstat(fd.get(), &again) != 0 || again.st_dev != st.st_dev ||
               again.st_ino != st.st_ino)) {
      return refused(name, "changed while it was opened");
    }
  }
  if (!fd) return failed(name, err);
  if (::fstat(fd.get(), &st) != 0) return failed(name, errno);
  if (wanted == Wanted::kRegular) {
    const int status = ::fcntl(fd.get(), F_GETFL);
    if (status < 0 || ::fcntl(fd.get(), F_SETFL, status & ~O_NONBLOCK) != 0) {
      return failed(name, errno);
    }
  }
  OpenedFile out;
  out.name = name;
  out.fd = std::move(fd);
  out.st = st;
  return out;
}

}  // namespace

OpenedFile open_regular_file(const std::string& path, const std::string& what,
                             const OpenRules& rules) {
  return open_checked(path, what, rules, Wanted::kRegular, O_RDONLY);
}

OpenedFile open_fifo_for_writing(const std::string& path, const std::string& what,
                                 const OpenRules& rules) {
  return open_checked(path, what, rules, Wanted::kFifo, O_WRONLY);
}

FileRead read_opened_file(const OpenedFile& file, std::size_t max_bytes, bool tail) {
  FileRead result;
  result.name = file.name;
  if (!file.ok()) {
    result.error = file.error;
    result.reason = file.reason;
    return result;
  }
  const auto size = static_cast<std::size_t>(std::max<off_t>(file.st.st_size, 0));
  if (tail && size > max_bytes &&
      ::lseek(file.fd.get(), static_cast<off_t>(size - max_bytes), SEEK_SET) < 0) {
    result.error = errno;
    result.reason = std::strerror(errno);
    return result;
  }
  std::string text;
  if (size > 0) text.reserve(std::min(size, max_bytes));
  char buffer[65536];
  while (text.size() < max_bytes) {  // /proc files report size 0: read to the end
    const ssize_t n =
        ::read(file.fd.get(), buffer, std::min(sizeof buffer, max_bytes - text.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      result.error = errno;
      result.reason = std::strerror(errno);
      return result;
    }
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
  }
  result.text = std::move(text);
  return result;
}

FileRead read_file(const std::string& path, std::size_t max_bytes, Links links) {
  return read_opened_file(open_regular_file(path, "file", {links, std::nullopt}), max_bytes);
}

FileRead read_proc_file(const std::string& path, std::size_t max_bytes) {
  OpenedFile file;
  file.name = "file " + printable(path);
  file.fd.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (!file.fd || ::fstat(file.fd.get(), &file.st) != 0) {
    const int err = errno;
    file.fd.reset();
    return read_opened_file(failed(file.name, err), max_bytes);
  }
  if (!S_ISREG(file.st.st_mode)) {
    return read_opened_file(refused(file.name, describe_file_type(file.st.st_mode)), max_bytes);
  }
  return read_opened_file(file, max_bytes);
}

FileRead read_file_tail(const std::string& path, const std::string& what, std::size_t max_bytes,
                        const OpenRules& rules) {
  return read_opened_file(open_regular_file(path, what, rules), max_bytes, true);
}

std::string describe_size(std::size_t bytes) {
  char text[64];
  std::snprintf(text, sizeof text, "%.1f MiB (%zu bytes)",
                static_cast<double>(bytes) / (1024.0 * 1024.0), bytes);
  return text;
}

// A pipe read to its end, refused past max_bytes.
static std::string read_pipe(const std::string& path, const std::string& name,
                             std::size_t max_bytes) {
  // Opened blocking: a named pipe is read once its writer has opened it (`<(command)` has one
  // already); with no writer yet, a non-blocking open would read an end of file. The wait is
  // interruptible (Ctrl-C ends it).
  const FileDescriptor reopened(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (reopened.get() < 0) throw_errno(name, errno);
  struct stat st {};
  if (::fstat(reopened.get(), &st) != 0) throw_errno(name, errno);
  if (!S_ISFIFO(st.st_mode)) throw Error(name + ": changed while it was opened");
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
                            InputKind kind, Links links) {
  const std::string name = what + " " + printable(path);
  if (kind == InputKind::kFileOrPipe) {
    struct stat st {};
    const FileDescriptor look(
        ::open(path.c_str(), O_PATH | O_CLOEXEC | (links == Links::kRefuse ? O_NOFOLLOW : 0)));
    if (look && ::fstat(look.get(), &st) == 0 && S_ISFIFO(st.st_mode)) {
      return read_pipe(path, name, max_bytes);
    }
  }
  const OpenedFile file = open_regular_file(path, what, {links, std::nullopt});
  if (!file.ok()) {
    if (file.error == EPERM) throw Error(file.why());
    throw SystemError(name, file.error);
  }
  const auto size = static_cast<std::size_t>(file.st.st_size);
  if (size > max_bytes) {
    throw Error(name + ": " + describe_size(size) + " is over the limit of " +
                describe_size(max_bytes) + " (--max-input-mib)");
  }
  std::string bytes(size, '\0');
  std::size_t used = 0;
  while (used < size) {  // a file that shrinks while read ends early; one that grows is cut
    const ssize_t n = ::read(file.fd.get(), bytes.data() + used, size - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno(name, errno);
    if (n == 0) break;
    used += static_cast<std::size_t>(n);
  }
  bytes.resize(used);
  return bytes;
}

std::optional<std::vector<std::string>> list_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  int error = 0;
  auto names = list_directory_at(fd, &error);
  ::close(fd);
  return names;
}

std::optional<std::vector<std::string>> list_directory_at(int dir_fd, int* error) {
  const int copy = ::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);  // closedir closes its descriptor
  DIR* d = copy < 0 ? nullptr : ::fdopendir(copy);
  if (d == nullptr) {
    *error = errno;
    if (copy >= 0) ::close(copy);
    return std::nullopt;
  }
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

namespace {

// A stream buffer over a file descriptor; the first failed write's errno is kept.
class DescriptorBuffer final : public std::streambuf {
 public:
  explicit DescriptorBuffer(int fd) : fd_(fd) { setp(buffer_, buffer_ + sizeof buffer_); }
  int error() const { return error_; }

 protected:
  int_type overflow(int_type c) override {
    if (!drain()) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  int sync() override { return drain() ? 0 : -1; }

 private:
  bool drain() {
    const char* at = pbase();
    while (at < pptr() && error_ == 0) {
      const ssize_t n = ::write(fd_, at, static_cast<std::size_t>(pptr() - at));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        error_ = n < 0 ? errno : EIO;
        break;
      }
      at += n;
    }
    setp(buffer_, buffer_ + sizeof buffer_);
    return error_ == 0;
  }

  int fd_;
  int error_ = 0;
  char buffer_[65536];
};

std::atomic<unsigned> replacement_counter{0};

std::string replacement_prefix(std::string_view base) {
  return "." + std::string(base) + ".new-";
}

}  // namespace

ReplacingFile::ReplacingFile(std::string path, mode_t mode) : path_(std::move(path)) {
  const std::string name = "cannot write " + printable(path_);
  const auto slash = path_.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path_.substr(0, slash);
  base_ = slash == std::string::npos ? path_ : path_.substr(slash + 1);
  if (base_.empty() || base_ == "." || base_ == "..") throw Error(name + ": not a file name");
  dir_.reset(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!dir_) throw_errno(name + ": directory " + printable(dir), errno);
  for (int attempt = 0; attempt < 100 && !fd_; ++attempt) {
    new_name_ = replacement_prefix(base_) + std::to_string(::getpid()) + "-" +
                std::to_string(replacement_counter++);
    fd_.reset(::openat(dir_.get(), new_name_.c_str(),
                       O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
    if (!fd_ && errno != EEXIST) throw_errno(name, errno);
  }
  if (!fd_) throw_errno(name, EEXIST);
}

ReplacingFile::~ReplacingFile() {
  stream_.reset();
  buffer_.reset();
  if (!committed_ && !new_name_.empty() && dir_) {
    fd_.reset();
    ::unlinkat(dir_.get(), new_name_.c_str(), 0);
  }
}

std::ostream& ReplacingFile::stream() {
  if (!stream_) {
    buffer_ = std::make_unique<DescriptorBuffer>(fd_.get());
    stream_ = std::make_unique<std::ostream>(buffer_.get());
  }
  return *stream_;
}

void ReplacingFile::commit() {
  const std::string name = "cannot write " + printable(path_);
  if (stream_) {
    stream_->flush();
    const int err = static_cast<DescriptorBuffer*>(buffer_.get())->error();
    if (err != 0 || !*stream_) throw_errno(name, err != 0 ? err : EIO);
  }
  if (::close(fd_.release()) != 0) throw_errno(name, errno);
  if (::renameat(dir_.get(), new_name_.c_str(), dir_.get(), base_.c_str()) != 0) {
    throw_errno(name, errno);
  }
  committed_ = true;
}

void write_file_replacing(const std::string& path, std::string_view bytes, mode_t mode) {
  ReplacingFile file(path, mode);
  file.stream().write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  file.commit();
}

bool is_replacement_of(std::string_view name, std::string_view base) {
  const std::string prefix = replacement_prefix(base);
  if (!name.starts_with(prefix)) return false;
  const std::string_view rest = name.substr(prefix.size());
  const auto dash = rest.find('-');
  if (dash == 0 || dash == std::string_view::npos || dash + 1 == rest.size()) return false;
  const auto digits = [](std::string_view s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  return digits(rest.substr(0, dash)) && digits(rest.substr(dash + 1));
}

}  // namespace hangscope
