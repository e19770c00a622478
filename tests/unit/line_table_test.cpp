#include "hangscope/python/line_table.h"

#include <gtest/gtest.h>

#include <vector>

namespace hangscope::python {
namespace {

std::vector<std::byte> bytes(std::initializer_list<int> values) {
  std::vector<std::byte> out;
  for (int v : values) out.push_back(static_cast<std::byte>(v));
  return out;
}

// 3.10: (byte delta, line delta) pairs.
TEST(LineTable310, PairsAdvanceAddressAndLine) {
  // [0,6) line 11; [6,10) line 13; [10,12) no line (-128); [12,20) line 12 (13 - 1).
  const auto table = bytes({6, 1, 4, 2, 2, 0x80, 8, 0xff});
  EXPECT_EQ(line_for_offset_310(table, 10, 0), 11);
  EXPECT_EQ(line_for_offset_310(table, 10, 4), 11);
  EXPECT_EQ(line_for_offset_310(table, 10, 6), 13);
  EXPECT_EQ(line_for_offset_310(table, 10, 10), std::nullopt);  // "no line" range
  EXPECT_EQ(line_for_offset_310(table, 10, 12), 12);            // line survives the gap
  EXPECT_EQ(line_for_offset_310(table, 10, 20), std::nullopt);  // past the end
  EXPECT_EQ(line_for_offset_310(table, 10, -1), 10);            // not started: first line
}

TEST(LineTable310, ZeroWidthEntriesOnlyMoveTheLine) {
  // A line jump bigger than 127 is split: (0, 127), then (4, 3) → line first + 130.
  const auto table = bytes({0, 127, 4, 3});
  EXPECT_EQ(line_for_offset_310(table, 1, 0), 131);
  EXPECT_EQ(line_for_offset_310(table, 1, 2), 131);
}

// 3.11+: one entry of each form.
TEST(LineTable311, EveryEntryForm) {
  const auto table = bytes({
      // short form (code 0..9): 2 units, same line (first line 20), one column byte
      0x80 | (3 << 3) | 1,
      0x12,
      // one-line form (code 11 = +1 line): 1 unit, two column bytes → line 21
      0x80 | (11 << 3) | 0,
      4,
      9,
      // no-column form (code 13): signed varint +3 (6) → line 24, 3 units
      0x80 | (13 << 3) | 2,
      6,
      // long form (code 14): signed varint -2 (5) → line 22, end line +1, col 2, end col 7
      0x80 | (14 << 3) | 0,
      5,
      1,
      3,
      8,
      // no location (code 15): 1 unit
      0x80 | (15 << 3) | 0,
      // no-column form with a two-byte varint: +100 → (200 = 0b11001000) → 0x48|0x40, 0x03
      0x80 | (13 << 3) | 0,
      0x40 | (200 & 63),
      200 >> 6,
  });
  EXPECT_EQ(line_for_offset_311(table, 20, 0), 20);
  EXPECT_EQ(line_for_offset_311(table, 20, 1), 20);
  EXPECT_EQ(line_for_offset_311(table, 20, 2), 21);
  EXPECT_EQ(line_for_offset_311(table, 20, 3), 24);
  EXPECT_EQ(line_for_offset_311(table, 20, 5), 24);
  EXPECT_EQ(line_for_offset_311(table, 20, 6), 22);
  EXPECT_EQ(line_for_offset_311(table, 20, 7), std::nullopt);  // no location
  EXPECT_EQ(line_for_offset_311(table, 20, 8), 122);
  EXPECT_EQ(line_for_offset_311(table, 20, 9), std::nullopt);  // past the end
  EXPECT_EQ(line_for_offset_311(table, 20, -1), 20);
}

TEST(LineTable311, CorruptTablesEndTheSearch) {
  EXPECT_EQ(line_for_offset_311(bytes({0x12}), 1, 0), std::nullopt);              // no entry bit
  EXPECT_EQ(line_for_offset_311(bytes({0x80 | (13 << 3)}), 1, 0), std::nullopt);  // truncated
  EXPECT_EQ(
      line_for_offset_311(bytes({0x80 | (13 << 3), 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f}), 1, 0),
      std::nullopt);  // endless varint
  EXPECT_EQ(line_for_offset_311({}, 5, 0), std::nullopt);
}

}  // namespace
}  // namespace hangscope::python
