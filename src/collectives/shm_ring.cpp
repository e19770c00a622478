#include "hangscope/collectives/shm_ring.h"

#include <unistd.h>

#include <cinttypes>
#include <cstdio>

#include "hangscope/common/error.h"
#include "hangscope/common/files.h"

namespace hangscope::collectives {
namespace {

constexpr std::uint64_t kMiB = 1024 * 1024;
constexpr std::uint64_t kMaxChunks = 64;
constexpr std::uint64_t kMaxReaders = 1024;
constexpr std::uint64_t kDefaultChunks = 10;
constexpr std::uint64_t kDefaultChunkBytes = 10 * kMiB;

// Every layout of this size: for a chunk count c, (size / c) mod 1 MiB is 1 + n_reader.
std::vector<RingLayout> layouts_of_size(std::uint64_t size) {
  std::vector<RingLayout> out;
  for (std::uint64_t chunks = 1; chunks <= kMaxChunks; ++chunks) {
    if (size % chunks != 0) continue;
    const std::uint64_t record = size / chunks;
    const std::uint64_t flags = record % kMiB;
    if (flags < 2 || flags - 1 > kMaxReaders || record - flags == 0) continue;
    out.push_back({record - flags, chunks, flags - 1});
  }
  return out;
}

}  // namespace

std::string block_list(const std::vector<int>& blocks) {
  std::string out;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    std::size_t j = i;
    while (j + 1 < blocks.size() && blocks[j + 1] == blocks[j] + 1) ++j;
    out += (out.empty() ? "" : ",") + std::to_string(blocks[i]) +
           (j > i ? "-" + std::to_string(blocks[j]) : "");
    i = j;
  }
  return out;
}

std::string RingLayout::describe() const {
  const bool whole = max_chunk_bytes % kMiB == 0;
  return std::to_string(max_chunks) + " blocks of " +
         (whole ? std::to_string(max_chunk_bytes / kMiB) + " MiB"
                : std::to_string(max_chunk_bytes) + " bytes") +
         ", " + std::to_string(n_reader) + (n_reader == 1 ? " reader" : " readers");
}

std::optional<RingLayout> recognise_ring_layout(std::uint64_t size, int expected_readers) {
  const auto layouts = layouts_of_size(size);
  for (const auto& l : layouts) {
    if (expected_readers > 0 && l.n_reader == static_cast<std::uint64_t>(expected_readers)) {
      return l;
    }
  }
  for (const auto& l : layouts) {
    if (l.max_chunks == kDefaultChunks && l.max_chunk_bytes == kDefaultChunkBytes) return l;
  }
  if (layouts.size() == 1) return layouts.front();
  return std::nullopt;  // none, or several and nothing to choose between them
}

RingState decode_ring(const std::string& name, const RingLayout& layout,
                      const std::string& metadata) {
  if (metadata.size() != layout.metadata_size()) {
    throw Error(name + ": " + std::to_string(metadata.size()) + " metadata bytes, expected " +
                std::to_string(layout.metadata_size()));
  }
  RingState state;
  state.name = name;
  state.layout = layout;
  const std::size_t record = 1 + layout.n_reader;
  for (std::size_t b = 0; b < layout.max_chunks; ++b) {
    RingBlock block;
    for (std::size_t f = 0; f < record; ++f) {
      const auto flag = static_cast<unsigned char>(metadata[b * record + f]);
      if (flag > 1) {
        throw Error(name + ": block " + std::to_string(b) + " has flag byte " +
                    std::to_string(flag) + " (vLLM's ring flags are 0 or 1): not its layout");
      }
      if (f == 0) {
        block.written = flag == 1;
      } else {
        block.read.push_back(flag == 1);
      }
    }
    state.blocks.push_back(std::move(block));
  }
  return state;
}

std::vector<std::vector<int>> RingState::unread_by_reader() const {
  std::vector<std::vector<int>> out(layout.n_reader);
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    if (!blocks[b].written) continue;
    for (std::size_t r = 0; r < blocks[b].read.size(); ++r) {
      if (!blocks[b].read[r]) out[r].push_back(static_cast<int>(b));
    }
  }
  return out;
}

bool RingState::all_read() const {
  for (const auto& unread : unread_by_reader()) {
    if (!unread.empty()) return false;
  }
  return true;
}

RingState read_ring(pid_t pid, std::uint64_t start, std::uint64_t end, const std::string& path,
                    int expected_readers) {
  const std::string name = path.substr(path.rfind('/') + 1);
  char range[64];
  std::snprintf(range, sizeof range, "%" PRIx64 "-%" PRIx64, start, end);
  const std::string via_map = "/proc/" + std::to_string(pid) + "/map_files/" + range;
  const std::string via_root = "/proc/" + std::to_string(pid) + "/root" + path;
  // The kernel's link to the mapped inode first; else the path in the rank's root, whose last
  // component must not be a link. Either way never a FIFO or device, never blocking.
  OpenedFile file = open_regular_file(via_map, "shared memory file");
  if (!file.ok()) {
    OpenedFile in_root = open_regular_file(via_root, "shared memory file", {Links::kRefuse, {}});
    if (!in_root.ok()) throw Error(name + ": " + file.why() + "; " + in_root.why());
    file = std::move(in_root);
  }
  const int fd = file.fd.get();
  const auto size = static_cast<std::uint64_t>(file.st.st_size);
  const auto layout = recognise_ring_layout(size, expected_readers);
  if (!layout) {
    throw Error(name + ": " + std::to_string(size) +
                " bytes fit no vLLM ring layout ((chunk bytes + 1 + readers) x chunks, chunk "
                "bytes a whole number of MiB, 1-64 chunks, " +
                std::to_string(expected_readers) + " readers expected)");
  }
  std::string metadata(layout->metadata_size(), '\0');
  const ssize_t n =
      ::pread(fd, metadata.data(), metadata.size(), static_cast<off_t>(layout->metadata_offset()));
  const int err = errno;
  if (n != static_cast<ssize_t>(metadata.size())) {
    throw Error(
        errno_message(name + ": reading its " + std::to_string(metadata.size()) + " metadata bytes",
                      n < 0 ? err : EIO));
  }
  return decode_ring(name, *layout, metadata);
}

}  // namespace hangscope::collectives
