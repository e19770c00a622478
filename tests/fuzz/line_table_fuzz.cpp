// Fuzz target: CPython line tables as the stack reader takes them from a code object in the
// target's memory (co_linetable / co_lnotab bytes, co_firstlineno, the frame's instruction).
// Input: 4 bytes first line (int32, little-endian), 4 bytes instruction offset (int32), then
// the table. Decoded for every supported version: 3.10's PEP 626 pairs (line_for_offset_310,
// with the offset in bytes) and the 3.11+ location table (line_for_offset_311, in code units).
#include <cstring>
#include <span>

#include "fuzz_support.h"
#include "hangscope/python/line_table.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace hangscope;
  if (size < 8) return 0;
  std::int32_t first_line = 0, offset = 0;
  std::memcpy(&first_line, data, 4);
  std::memcpy(&offset, data + 4, 4);
  const auto table = std::span(reinterpret_cast<const std::byte*>(data + 8), size - 8);
  (void)python::line_for_offset_310(table, first_line, offset);
  (void)python::line_for_offset_311(table, first_line, offset);
  // Every instruction of a small code object, as a thread could stand at any of them.
  for (int unit = -1; unit < 64; ++unit) {
    (void)python::line_for_offset_310(table, first_line, unit * 2);
    (void)python::line_for_offset_311(table, first_line, unit);
  }
  return 0;
}
