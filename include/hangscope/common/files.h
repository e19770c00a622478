// Small, bounded reads of whole files (mostly /proc entries), reporting errno instead of throwing.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace hangscope {

// Contents of a file, or the errno that stopped the read.
struct FileRead {
  std::optional<std::string> text;
  int error = 0;
};

// Reads at most max_bytes of path. /proc files report size 0, so this reads until EOF.
FileRead read_file(const std::string& path, std::size_t max_bytes = 16u << 20);

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
// a FIFO or device, a file over the limit (with its size) or a failed read (errno's reason).
std::string read_input_file(const std::string& path, const std::string& what,
                            std::size_t max_bytes = kDefaultMaxInputBytes,
                            InputKind kind = InputKind::kRegularFile);

// "1.5 MiB (1572864 bytes)": a size for messages.
std::string describe_size(std::size_t bytes);

// The entry names of a directory (without "." and ".."), sorted; nullopt when it cannot be
// opened.
std::optional<std::vector<std::string>> list_directory(const std::string& dir);

}  // namespace hangscope
