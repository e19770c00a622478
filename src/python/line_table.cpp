#include "hangscope/python/line_table.h"

#include <cstdint>
#include <limits>

namespace hangscope::python {
namespace {

// A cursor over a byte span that reports running past the end instead of reading it.
class ByteCursor {
 public:
  explicit ByteCursor(std::span<const std::byte> bytes) : bytes_(bytes) {}
  bool at_end() const { return pos_ >= bytes_.size(); }
  std::optional<std::uint8_t> next() {
    if (at_end()) return std::nullopt;
    return static_cast<std::uint8_t>(bytes_[pos_++]);
  }
  // 6 bits per byte, bit 6 set = more bytes follow.
  std::optional<std::uint32_t> varint() {
    auto byte = next();
    if (!byte) return std::nullopt;
    std::uint32_t value = *byte & 63u;
    unsigned shift = 0;
    while (*byte & 64u) {
      byte = next();
      shift += 6;
      if (!byte || shift > 30) return std::nullopt;
      value |= static_cast<std::uint32_t>(*byte & 63u) << shift;
    }
    return value;
  }
  // Low bit is the sign.
  std::optional<int> signed_varint() {
    const auto value = varint();
    if (!value) return std::nullopt;
    const int magnitude = static_cast<int>(*value >> 1);
    return (*value & 1u) ? -magnitude : magnitude;
  }

 private:
  std::span<const std::byte> bytes_;
  std::size_t pos_ = 0;
};

// line + delta, or nullopt when the sum leaves int: a table from the target's memory may add
// up to any line (and no real code object has such a line).
std::optional<int> advance(int line, std::int64_t delta) {
  const std::int64_t next = line + delta;
  if (next < std::numeric_limits<int>::min() || next > std::numeric_limits<int>::max()) {
    return std::nullopt;
  }
  return static_cast<int>(next);
}

}  // namespace

std::optional<int> line_for_offset_310(std::span<const std::byte> table, int first_line,
                                       int byte_offset) {
  if (byte_offset < 0) return first_line;
  // Each entry advances the address range [start, end) and the running line; ranges of width
  // zero only carry line changes (CPython skips them when looking an address up).
  int end = 0;
  int line = first_line;
  for (std::size_t i = 0; i + 1 < table.size(); i += 2) {
    const int start = end;
    end += static_cast<std::uint8_t>(table[i]);
    const auto line_delta = static_cast<std::int8_t>(table[i + 1]);
    std::optional<int> range_line;
    if (line_delta != -128) {
      const auto next = advance(line, line_delta);
      if (!next) return std::nullopt;  // a corrupt table
      line = *next;
      range_line = line;
    }
    if (start == end) continue;
    if (byte_offset >= start && byte_offset < end) return range_line;
  }
  return std::nullopt;
}

std::optional<int> line_for_offset_311(std::span<const std::byte> table, int first_line,
                                       int code_unit) {
  if (code_unit < 0) return first_line;
  ByteCursor cursor(table);
  int line = first_line;
  int address = 0;  // in code units
  while (!cursor.at_end()) {
    const auto first = cursor.next();
    if (!(*first & 0x80u)) return std::nullopt;  // not the start of an entry: corrupt table
    const unsigned code = (*first >> 3) & 15u;
    const int length = static_cast<int>(*first & 7u) + 1;
    bool has_line = true;
    int delta = 0;
    if (code == 15) {
      has_line = false;
    } else if (code == 14) {  // long form: line delta, end line, column, end column
      const auto d = cursor.signed_varint();
      if (!d || !cursor.varint() || !cursor.varint() || !cursor.varint()) return std::nullopt;
      delta = *d;
    } else if (code == 13) {  // no columns
      const auto d = cursor.signed_varint();
      if (!d) return std::nullopt;
      delta = *d;
    } else if (code >= 10) {  // one-line form: delta = code - 10, then two column bytes
      delta = static_cast<int>(code) - 10;
      if (!cursor.next() || !cursor.next()) return std::nullopt;
    } else {  // short form: same line, one column byte
      if (!cursor.next()) return std::nullopt;
    }
    const auto next = advance(line, delta);
    if (!next) return std::nullopt;  // a corrupt table
    line = *next;
    if (code_unit >= address && code_unit < address + length) {
      return has_line ? std::optional<int>(line) : std::nullopt;
    }
    address += length;
  }
  return std::nullopt;
}

}  // namespace hangscope::python
