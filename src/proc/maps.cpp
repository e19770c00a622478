#include "hangscope/proc/maps.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <string>

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

// A mapping's name as maps writes it (a path, "[heap]", "[anon:NAME]"), with the kernel's
// " (deleted)" after a file deleted since it was mapped taken off into `deleted`.
void set_name(Mapping& m, std::string_view name) {
  constexpr std::string_view kDeleted = " (deleted)";
  if (name.size() > kDeleted.size() && name.ends_with(kDeleted)) {
    m.deleted = true;
    name.remove_suffix(kDeleted.size());
  }
  m.path = std::string(name);
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
  set_name(m, rest);
  return m;
}

MemoryMap::MemoryMap(std::vector<Mapping> mappings) : mappings_(std::move(mappings)) {
  const auto by_start = [](const Mapping& a, const Mapping& b) { return a.start < b.start; };
  // The kernel lists them in order: only a list out of order is sorted.
  if (!std::is_sorted(mappings_.begin(), mappings_.end(), by_start)) {
    std::sort(mappings_.begin(), mappings_.end(), by_start);
  }
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

namespace {

// Linux 6.11's PROCMAP_QUERY (include/uapi/linux/fs.h), declared here: the build machine's
// headers may predate it. The kernel checks `size`, so a newer kernel still takes this layout.
struct ProcmapQuery {
  std::uint64_t size;
  std::uint64_t query_flags;    // in
  std::uint64_t query_addr;     // in
  std::uint64_t vma_start;      // out
  std::uint64_t vma_end;        // out
  std::uint64_t vma_flags;      // out
  std::uint64_t vma_page_size;  // out
  std::uint64_t vma_offset;     // out
  std::uint64_t inode;          // out
  std::uint32_t dev_major;      // out
  std::uint32_t dev_minor;      // out
  std::uint32_t vma_name_size;  // in/out
  std::uint32_t build_id_size;  // in/out
  std::uint64_t vma_name_addr;  // in
  std::uint64_t build_id_addr;  // in
};
static_assert(sizeof(ProcmapQuery) == 104);
constexpr unsigned long kProcmapQuery = 0xC0686611;  // _IOWR('f', 17, struct procmap_query)
constexpr std::uint64_t kVmaReadable = 0x01;
constexpr std::uint64_t kVmaWritable = 0x02;
constexpr std::uint64_t kVmaExecutable = 0x04;
constexpr std::uint64_t kCoveringOrNextVma = 0x10;

// "major:minor" in hex, at least two digits each, as the text of maps writes a device.
std::string device_text(std::uint32_t major, std::uint32_t minor) {
  std::string text;
  const auto append_hex = [&text](std::uint32_t value) {
    char digits[8];
    char* end = std::to_chars(digits, digits + sizeof digits, value, 16).ptr;
    if (end - digits < 2) text += '0';
    text.append(digits, end);
  };
  append_hex(major);
  text += ':';
  append_hex(minor);
  return text;
}

// One mapping from a query's answer; its name (a path, "[heap]", "[anon:NAME]") as the text
// writes it, with " (deleted)" taken off into `deleted`.
Mapping mapping_of(const ProcmapQuery& q, std::string_view name) {
  Mapping m;
  m.start = q.vma_start;
  m.end = q.vma_end;
  m.readable = (q.vma_flags & kVmaReadable) != 0;
  m.writable = (q.vma_flags & kVmaWritable) != 0;
  m.executable = (q.vma_flags & kVmaExecutable) != 0;
  m.offset = q.vma_offset;
  m.inode = q.inode;
  m.device = device_text(q.dev_major, q.dev_minor);
  set_name(m, name);
  return m;
}

// Every mapping through PROCMAP_QUERY, each with its name; nullopt with errno in *error when the
// kernel has no such ioctl (ENOTTY) or a query fails.
std::optional<MemoryMap> query_mappings(int fd, int* error) {
  std::vector<Mapping> mappings;
  mappings.reserve(2048);             // a torch process has about 1,700: none moved on the way
  std::string name(4096 + 16, '\0');  // d_path writes at most PATH_MAX
  std::uint64_t address = 0;
  for (;;) {
    ProcmapQuery q{};
    q.size = sizeof q;
    q.query_flags = kCoveringOrNextVma;
    q.query_addr = address;
    q.vma_name_size = static_cast<std::uint32_t>(name.size());
    q.vma_name_addr = reinterpret_cast<std::uint64_t>(name.data());
    if (::ioctl(fd, kProcmapQuery, &q) != 0) {
      if (errno == ENOENT) break;  // no mapping at or after `address`
      if (error) *error = errno;
      return std::nullopt;
    }
    // vma_name_size counts the terminating NUL; 0 means no name (anonymous).
    const std::size_t length = q.vma_name_size > 0 ? q.vma_name_size - 1 : 0;
    mappings.push_back(mapping_of(q, std::string_view(name.data(), length)));
    if (q.vma_end <= address) break;  // never loop on a kernel that answers oddly
    address = q.vma_end;
  }
  return MemoryMap(std::move(mappings));
}

std::optional<MemoryMap> read_maps_text(int fd, int* error) {
  std::string text;
  char buffer[64 * 1024];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      if (error) *error = errno;
      return std::nullopt;
    }
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
    if (text.size() > (64u << 20)) {
      if (error) *error = EFBIG;
      return std::nullopt;
    }
  }
  return MemoryMap::parse(text);
}

}  // namespace

std::optional<MemoryMap> read_memory_map(pid_t pid, int* error, MapsMethod method) {
  const FileDescriptor file(
      ::open(("/proc/" + std::to_string(pid) + "/maps").c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!file) {
    if (error) *error = errno;
    return std::nullopt;
  }
  if (method != MapsMethod::kText) {
    int query_error = 0;
    if (auto map = query_mappings(file.get(), &query_error)) return map;
    if (method == MapsMethod::kQuery) {
      if (error) *error = query_error;
      return std::nullopt;
    }
    // An older kernel (ENOTTY), or a query that failed: the text says what it can.
  }
  return read_maps_text(file.get(), error);
}

}  // namespace hangscope::proc
