#include "hangscope/proc/maps.h"

#include <algorithm>
#include <charconv>

#include "hangscope/common/files.h"

namespace hangscope::proc {
namespace {

bool parse_hex(std::string_view text, std::uint64_t& out) {
  const auto result = std::from_chars(text.data(), text.data() + text.size(), out, 16);
  return result.ec == std::errc() && result.ptr == text.data() + text.size() && !text.empty();
}

std::string_view next_word(std::string_view& rest) {
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  const auto end = rest.find(' ');
  const std::string_view word = rest.substr(0, end);
  rest.remove_prefix(end == std::string_view::npos ? rest.size() : end);
  return word;
}

}  // namespace

std::optional<Mapping> parse_maps_line(std::string_view line) {
  if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
  std::string_view rest = line;
  const std::string_view range = next_word(rest);
  const std::string_view perms = next_word(rest);
  const std::string_view offset = next_word(rest);
  const std::string_view device = next_word(rest);
  const std::string_view inode = next_word(rest);
  const auto dash = range.find('-');
  Mapping m;
  if (dash == std::string_view::npos || perms.size() < 4) return std::nullopt;
  if (!parse_hex(range.substr(0, dash), m.start) || !parse_hex(range.substr(dash + 1), m.end) ||
      !parse_hex(offset, m.offset) || m.end < m.start) {
    return std::nullopt;
  }
  const auto inode_result = std::from_chars(inode.data(), inode.data() + inode.size(), m.inode);
  if (inode_result.ec != std::errc()) return std::nullopt;
  m.readable = perms[0] == 'r';
  m.writable = perms[1] == 'w';
  m.executable = perms[2] == 'x';
  m.device = std::string(device);
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  constexpr std::string_view kDeleted = " (deleted)";
  if (rest.size() > kDeleted.size() && rest.substr(rest.size() - kDeleted.size()) == kDeleted) {
    m.deleted = true;
    rest.remove_suffix(kDeleted.size());
  }
  m.path = std::string(rest);
  return m;
}

MemoryMap::MemoryMap(std::vector<Mapping> mappings) : mappings_(std::move(mappings)) {
  std::sort(mappings_.begin(), mappings_.end(),
            [](const Mapping& a, const Mapping& b) { return a.start < b.start; });
}

MemoryMap MemoryMap::parse(std::string_view text) {
  std::vector<Mapping> mappings;
  std::size_t malformed = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    auto end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const auto line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty()) continue;
    if (auto mapping = parse_maps_line(line)) {
      mappings.push_back(std::move(*mapping));
    } else {
      ++malformed;
    }
  }
  MemoryMap map(std::move(mappings));
  map.malformed_lines_ = malformed;
  return map;
}

const Mapping* MemoryMap::find(std::uint64_t address) const {
  auto it = std::upper_bound(mappings_.begin(), mappings_.end(), address,
                             [](std::uint64_t a, const Mapping& m) { return a < m.start; });
  if (it == mappings_.begin()) return nullptr;
  --it;
  return it->contains(address) ? &*it : nullptr;
}

std::optional<MemoryMap> read_memory_map(pid_t pid, int* error) {
  auto read = read_proc_file("/proc/" + std::to_string(pid) + "/maps", 64u << 20);
  if (!read.text) {
    if (error) *error = read.error;
    return std::nullopt;
  }
  return MemoryMap::parse(*read.text);
}

}  // namespace hangscope::proc
