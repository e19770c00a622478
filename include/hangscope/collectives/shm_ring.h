// vLLM's shared-memory broadcast ring (ShmRingBuffer in a /dev/shm/psm_* segment): its layout
// recognised from the segment's size and the number of processes that map it, and its block
// flags read, to tell which reader has not acknowledged which block.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hangscope::collectives {

// (max_chunk_bytes + 1 + n_reader) × max_chunks bytes: the chunks, then one metadata record
// of 1 + n_reader flag bytes per chunk (written flag, then each reader's read flag).
struct RingLayout {
  std::uint64_t max_chunk_bytes = 0;
  std::uint64_t max_chunks = 0;
  std::uint64_t n_reader = 0;
  std::uint64_t metadata_offset() const { return max_chunk_bytes * max_chunks; }
  std::uint64_t metadata_size() const { return (1 + n_reader) * max_chunks; }
  std::string describe() const;  // "10 blocks of 10 MiB, 3 readers"
};

// The layout whose size is exactly `size` (chunk bytes a whole number of MiB, as vLLM's
// VLLM_MQ_MAX_CHUNK_BYTES_MB sets them; 1-64 chunks): the one with `expected_readers` readers
// first, then vLLM's defaults (10 chunks of 10 MiB). Nullopt when no layout fits.
std::optional<RingLayout> recognise_ring_layout(std::uint64_t size, int expected_readers);

struct RingBlock {
  bool written = false;
  std::vector<bool> read;  // per reader
};

struct RingState {
  std::string name;  // "psm_1f2e3d4c"
  RingLayout layout;
  std::vector<RingBlock> blocks;
  // Per reader: the blocks written that it has not read (acknowledged) yet.
  std::vector<std::vector<int>> unread_by_reader() const;
  // True when no block is written and unread: readers wait for the writer.
  bool all_read() const;
};

// Block numbers for people: {0,1,2,3,7} → "0-3,7".
std::string block_list(const std::vector<int>& blocks);

// Decodes the metadata bytes (exactly layout.metadata_size()); throws Error when a flag is
// neither 0 nor 1 (not vLLM's ring, or another version of it).
RingState decode_ring(const std::string& name, const RingLayout& layout,
                      const std::string& metadata);

// Reads a ring from a process that maps it: the segment's size, then its metadata, through
// /proc/PID/map_files (works after the segment was unlinked) or the process's /dev/shm.
// `expected_readers`: how many processes map it, minus the writer. Throws Error with the reason.
RingState read_ring(pid_t pid, std::uint64_t start, std::uint64_t end, const std::string& path,
                    int expected_readers);

}  // namespace hangscope::collectives
