// Files opened and written on behalf of input: one place that decides how a path that a user, a
// target process, a core file or a bundle names is opened (never blocking, never a FIFO or device,
// symbolic links and owners as the caller's rules say), and how an output replaces what was at
// its path (never written through). Errors name the file and the reason; nothing here blocks on a
// FIFO, so Ctrl-C and deadlines keep working. docs/security.md, "Files".
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace hangscope {

// A file descriptor, closed when destroyed.
class FileDescriptor {
 public:
  FileDescriptor() = default;
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() { reset(); }
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(other.release()) {}
  FileDescriptor& operator=(FileDescriptor&& other) noexcept;
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// Whether a symbolic link as the last component of a path is followed.
enum class Links {
  kFollow,  // the path is the user's (a command-line argument, a glob they gave) or the
            // kernel's (/proc/PID/fd/N, /proc/PID/map_files/…)
  kRefuse,  // the path comes from data (a core's NT_FILE, a rank's environment or files, a
            // bundle): a symbolic link is refused (O_NOFOLLOW), never followed
};

// What a file opened on behalf of an input must be, besides its type.
struct OpenRules {
  Links links = Links::kFollow;
  // Set: the file must belong to this uid or to root (a file a job's user planted for root).
  std::optional<uid_t> owner;
};

// A file opened on behalf of an input, or why not.
struct OpenedFile {
  std::string name;    // "WHAT PATH", for messages
  FileDescriptor fd;   // open when ok()
  struct stat st {};   // fstat of fd
  int error = 0;       // errno of a failed open (ENOENT: absent); EPERM when refused by a rule
  std::string reason;  // why not ok(): "is a FIFO, not a regular file", strerror's text
  bool ok() const { return static_cast<bool>(fd); }
  std::string why() const { return name + ": " + reason; }
};

// Opens a file to read on behalf of an input. The path is first opened with O_PATH (which opens
// no device and waits for no FIFO writer) and looked at with fstat: anything but a regular file
// (directory, FIFO, character or block device, socket, a refused symbolic link), or a file of
// another owner than `rules.owner` allows, is refused with the reason and never opened. Only then
// is the same inode opened for reading, through /proc/self/fd (O_NONBLOCK, cleared once open).
// `what` names the file in messages: "core file", "flight-recorder dump".
OpenedFile open_regular_file(const std::string& path, const std::string& what,
                             const OpenRules& rules = {});

// Opens a FIFO for writing without blocking (O_NONBLOCK stays set) under the same rules: anything
// but a FIFO is refused; no reader gives error ENXIO.
OpenedFile open_fifo_for_writing(const std::string& path, const std::string& what,
                                 const OpenRules& rules = {});

// Contents of a file, or why not.
struct FileRead {
  std::optional<std::string> text;
  int error = 0;       // errno that stopped the read; EPERM when a rule refused the file
  std::string name;    // "WHAT PATH"
  std::string reason;  // why there is no text
  std::string why() const { return name + ": " + reason; }
};

// The first max_bytes of an opened file (read to its end: /proc files report size 0), or the
// last max_bytes when `tail`.
FileRead read_opened_file(const OpenedFile& file, std::size_t max_bytes, bool tail = false);

// Reads at most max_bytes of a regular file (mostly /proc and /sys entries, and files in a rank's
// root): open_regular_file(path, "file", {links}), so a FIFO or device there is refused.
FileRead read_file(const std::string& path, std::size_t max_bytes = 16u << 20,
                   Links links = Links::kFollow);

// A kernel file at a path hangscope builds from numbers alone (/proc/PID/task/TID/stat, its
// status, wchan, maps, cmdline, environ, net/*): no link or name in it comes from data, so it is
// opened directly (O_NONBLOCK, no O_PATH look first: the freezer reads three per thread) and still
// refused unless fstat says it is a regular file. Anything a target or user names goes through
// read_file or open_regular_file instead.
FileRead read_proc_file(const std::string& path, std::size_t max_bytes = 16u << 20);

// The last max_bytes of a regular file (a log), under `rules`.
FileRead read_file_tail(const std::string& path, const std::string& what, std::size_t max_bytes,
                        const OpenRules& rules = {});

// The most a command reads of one input file (snapshot, bundle or rule file) unless told
// otherwise (--max-input-mib): larger files are refused with their size.
inline constexpr std::size_t kDefaultMaxInputBytes = std::size_t{512} << 20;

// What read_input_file takes besides regular files.
enum class InputKind {
  kRegularFile,  // snapshot, bundle and rule files
  kFileOrPipe,   // hostfiles and tokens, also given as `--hostfile <(command)`
};

// Reads a file the user gave (`what` names it in errors: "snapshot file", "--hostfile"): a
// regular file of at most max_bytes, read in one allocation of its size (or a pipe, read to
// its end, when `kind` allows). Throws hangscope::Error "WHAT PATH: reason" for a directory,
// a FIFO or device, a refused symbolic link, a file over the limit (with its size) or a failed
// read (errno's reason).
std::string read_input_file(const std::string& path, const std::string& what,
                            std::size_t max_bytes = kDefaultMaxInputBytes,
                            InputKind kind = InputKind::kRegularFile, Links links = Links::kFollow);

// "1.5 MiB (1572864 bytes)": a size for messages.
std::string describe_size(std::size_t bytes);

// "is a FIFO, not a regular file": what a file's type makes it, for messages.
std::string describe_file_type(mode_t mode);

// The entry names of a directory (without "." and ".."), sorted; nullopt when it cannot be
// opened.
std::optional<std::vector<std::string>> list_directory(const std::string& dir);
// The same for a directory already open (`dir_fd` stays open and is not moved); nullopt with
// the reason in *error (errno) when it cannot be listed.
std::optional<std::vector<std::string>> list_directory_at(int dir_fd, int* error);

// An output file written whole, then put in place: a new file is created beside `path`
// (openat O_CREAT|O_EXCL|O_NOFOLLOW, `mode`) and renamed over it (renameat) by commit(). Whatever
// was at the path — a file, a symbolic link, a FIFO — is replaced, never written through, and a
// reader never sees half a file. An uncommitted new file is removed when this is destroyed.
class ReplacingFile {
 public:
  // Throws hangscope::Error "cannot write PATH: reason".
  explicit ReplacingFile(std::string path, mode_t mode = 0644);
  ~ReplacingFile();
  ReplacingFile(const ReplacingFile&) = delete;
  ReplacingFile& operator=(const ReplacingFile&) = delete;

  const std::string& path() const { return path_; }
  // The new file, for writers of their own (protobuf's FileOutputStream); not mixed with stream().
  int fd() const { return fd_.get(); }
  // A buffered stream into the new file.
  std::ostream& stream();
  // Flushes, closes and renames the new file over the path. Throws hangscope::Error "cannot write
  // PATH: reason" (a failed write, a full disk, a directory at the path).
  void commit();

 private:
  std::string path_;
  std::string base_;      // the last component of path_
  std::string new_name_;  // the new file's name in the directory
  FileDescriptor dir_;
  FileDescriptor fd_;
  std::unique_ptr<std::streambuf> buffer_;
  std::unique_ptr<std::ostream> stream_;
  bool committed_ = false;
};

// Writes `bytes` to `path` through a ReplacingFile.
void write_file_replacing(const std::string& path, std::string_view bytes, mode_t mode = 0644);

// True when `name` is the new file a ReplacingFile of `base` makes (".BASE.new-PID-N"), as an
// interrupted run leaves it.
bool is_replacement_of(std::string_view name, std::string_view base);

}  // namespace hangscope
