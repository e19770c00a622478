// Fuzz target: vLLM's shared-memory broadcast ring as read from a /dev/shm/psm_* segment of a
// rank. Input: 8 bytes segment size (uint64), 2 bytes the number of readers expected (int16),
// then the segment's metadata bytes. recognise_ring_layout picks the layout from the size (as
// read_ring does with fstat); decode_ring decodes the metadata (any length: a short read or
// another layout must be refused with hangscope::Error); then the unread blocks per reader,
// all_read, block_list and the layout's description, as the shm fact and analysis use them.
#include <cstring>

#include "fuzz_support.h"
#include "hangscope/collectives/shm_ring.h"
#include "hangscope/common/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace hangscope;
  if (size < 10) return 0;
  std::uint64_t segment = 0;
  std::int16_t readers = 0;
  std::memcpy(&segment, data, 8);
  std::memcpy(&readers, data + 8, 2);
  const auto layout = collectives::recognise_ring_layout(segment, readers);
  if (!layout) return 0;
  (void)layout->describe();
  if (layout->metadata_offset() + layout->metadata_size() != segment) __builtin_trap();
  try {
    const auto state =
        collectives::decode_ring("psm_fuzz", *layout, fuzz::input(data + 10, size - 10));
    for (const auto& unread : state.unread_by_reader()) (void)collectives::block_list(unread);
    (void)state.all_read();
  } catch (const Error&) {
  }
  return 0;
}
