// The memory map of a process (/proc/PID/maps): parsing and address lookup.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hangscope::proc {

// One line of /proc/PID/maps.
struct Mapping {
  std::uint64_t start = 0;
  std::uint64_t end = 0;
  bool readable = false;
  bool writable = false;
  bool executable = false;
  std::uint64_t offset = 0;  // file offset of `start`
  std::uint64_t inode = 0;
  std::string device;    // "major:minor"
  std::string path;      // file path, "[stack]", "[heap]", "" for anonymous
  bool deleted = false;  // the file was deleted after it was mapped

  bool contains(std::uint64_t address) const { return address >= start && address < end; }
  bool is_file() const { return inode != 0 && !path.empty() && path.front() == '/'; }
};

// Parses one maps line; nullopt when malformed.
std::optional<Mapping> parse_maps_line(std::string_view line);

// All mappings of a process, sorted by address.
class MemoryMap {
 public:
  MemoryMap() = default;
  explicit MemoryMap(std::vector<Mapping> mappings);

  // Parses the whole text of a maps file; malformed lines are skipped and counted.
  static MemoryMap parse(std::string_view text);

  const Mapping* find(std::uint64_t address) const;
  const std::vector<Mapping>& mappings() const { return mappings_; }
  std::size_t malformed_lines() const { return malformed_lines_; }

 private:
  std::vector<Mapping> mappings_;
  std::size_t malformed_lines_ = 0;
};

// How a memory map is read.
enum class MapsMethod {
  kBest,   // the query when the kernel has it, else the text
  kQuery,  // PROCMAP_QUERY (Linux 6.11): one ioctl per mapping, no text formatted or parsed
  kText,   // the text of /proc/PID/maps, parsed
};

// The mappings of `pid`; nullopt with errno in *error when unreadable (ENOTTY: kQuery asked of a
// kernel without it). The two methods agree but for [vsyscall], which only the text lists (no
// code of a target runs there).
std::optional<MemoryMap> read_memory_map(pid_t pid, int* error,
                                         MapsMethod method = MapsMethod::kBest);

}  // namespace hangscope::proc
