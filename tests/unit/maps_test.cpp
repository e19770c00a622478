#include "hangscope/proc/maps.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace hangscope::proc {
namespace {

__attribute__((noinline)) int code_marker() {
  return 7;
}

TEST(Maps, ParsesFileAnonymousSpecialAndDeletedMappings) {
  const auto map = MemoryMap::parse(
      "55d0c0a00000-55d0c0a2e000 r--p 00000000 08:01 1311017 /usr/bin/python3.11\n"
      "55d0c0a2e000-55d0c0d05000 r-xp 0002e000 08:01 1311017 /usr/bin/python3.11\n"
      "7f0000000000-7f0000021000 rw-p 00000000 00:00 0 \n"
      "7f1000000000-7f1000001000 r-xp 00001000 00:05 42 /tmp/lib with space.so (deleted)\n"
      "7ffc1c0f0000-7ffc1c111000 rw-p 00000000 00:00 0                          [stack]\n"
      "not a mapping line\n");
  ASSERT_EQ(map.mappings().size(), 5u);
  EXPECT_EQ(map.malformed_lines(), 1u);
  const auto* text = map.find(0x55d0c0a2e123);
  ASSERT_NE(text, nullptr);
  EXPECT_TRUE(text->executable);
  EXPECT_FALSE(text->writable);
  EXPECT_EQ(text->offset, 0x2e000u);
  EXPECT_EQ(text->inode, 1311017u);
  EXPECT_EQ(text->path, "/usr/bin/python3.11");
  EXPECT_TRUE(text->is_file());
  const auto* anon = map.find(0x7f0000000010);
  ASSERT_NE(anon, nullptr);
  EXPECT_EQ(anon->path, "");
  EXPECT_FALSE(anon->is_file());
  const auto* deleted = map.find(0x7f1000000000);
  ASSERT_NE(deleted, nullptr);
  EXPECT_TRUE(deleted->deleted);
  EXPECT_EQ(deleted->path, "/tmp/lib with space.so");
  EXPECT_EQ(map.find(0x7ffc1c110fff)->path, "[stack]");
  EXPECT_EQ(map.find(0x7ffc1c111000), nullptr);  // end is exclusive
  EXPECT_EQ(map.find(0x1000), nullptr);
}

TEST(Maps, RejectsMalformedLines) {
  EXPECT_FALSE(parse_maps_line(""));
  EXPECT_FALSE(parse_maps_line("zz-10 r-xp 0 00:00 0"));
  EXPECT_FALSE(parse_maps_line("20-10 r-xp 0 00:00 0"));  // end before start
  EXPECT_FALSE(parse_maps_line("10-20 r 0 00:00 0"));
}

TEST(Maps, ReadsOwnMapAndFindsOwnCode) {
  int error = 0;
  const auto map = read_memory_map(::getpid(), &error);
  ASSERT_TRUE(map) << error;
  const auto* here = map->find(reinterpret_cast<std::uint64_t>(&code_marker));
  ASSERT_NE(here, nullptr);
  EXPECT_TRUE(here->executable);
  int missing_error = 0;
  EXPECT_FALSE(read_memory_map(0x7ffffff0, &missing_error));
  EXPECT_EQ(missing_error, ENOENT);
}

}  // namespace
}  // namespace hangscope::proc
