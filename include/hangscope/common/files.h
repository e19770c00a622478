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

// The entry names of a directory (without "." and ".."), sorted; nullopt when it cannot be
// opened.
std::optional<std::vector<std::string>> list_directory(const std::string& dir);

}  // namespace hangscope
