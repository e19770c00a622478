// vLLM's broadcast ring: layouts recognised from a segment's size (and not guessed when
// several fit), block flags decoded into who has not read what, foreign bytes refused, and a
// real /dev/shm segment read back through /proc/self/map_files as the agent reads a rank's.
#include "hangscope/collectives/shm_ring.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <fstream>

#include "hangscope/common/error.h"
#include "hangscope/proc/maps.h"

namespace hangscope::collectives {
namespace {

constexpr std::uint64_t kMiB = 1024 * 1024;

std::uint64_t ring_size(std::uint64_t chunk_bytes, std::uint64_t chunks, std::uint64_t readers) {
  return (chunk_bytes + 1 + readers) * chunks;
}

TEST(ShmRing, VllmsDefaultLayoutIsRecognisedWithTheReadersExpected) {
  const auto layout = recognise_ring_layout(ring_size(10 * kMiB, 10, 3), 3);
  ASSERT_TRUE(layout);
  EXPECT_EQ(layout->max_chunk_bytes, 10 * kMiB);
  EXPECT_EQ(layout->max_chunks, 10u);
  EXPECT_EQ(layout->n_reader, 3u);
  EXPECT_EQ(layout->describe(), "10 blocks of 10 MiB, 3 readers");
  EXPECT_EQ(layout->metadata_offset(), 100 * kMiB);
  EXPECT_EQ(layout->metadata_size(), 40u);
  // A reader died (fewer mappers than readers): the default layout still wins.
  const auto with_a_dead_reader = recognise_ring_layout(ring_size(10 * kMiB, 10, 3), 2);
  ASSERT_TRUE(with_a_dead_reader);
  EXPECT_EQ(with_a_dead_reader->n_reader, 3u);
}

TEST(ShmRing, OtherChunkSizesAreRecognisedAndUnfittingSizesAreNot) {
  const auto layout = recognise_ring_layout(ring_size(4 * kMiB, 6, 7), 7);
  ASSERT_TRUE(layout);
  EXPECT_EQ(layout->max_chunk_bytes, 4 * kMiB);
  EXPECT_EQ(layout->max_chunks, 6u);
  EXPECT_EQ(recognise_ring_layout(12345, 3), std::nullopt);
  EXPECT_EQ(recognise_ring_layout(10 * kMiB, 1), std::nullopt);  // no flag bytes
  EXPECT_EQ(recognise_ring_layout(0, 1), std::nullopt);
}

TEST(ShmRing, FlagsTellWhichReaderHasNotReadWhichBlock) {
  const RingLayout layout{kMiB, 4, 3};
  // Block 0: written, read by readers 0 and 2 only; block 1: written, read by all; block 2:
  // written, read by reader 0; block 3: not written.
  const std::string metadata(
      "\1\1\0\1"
      "\1\1\1\1"
      "\1\1\0\0"
      "\0\0\0\0",
      16);
  const auto ring = decode_ring("psm_test", layout, metadata);
  ASSERT_EQ(ring.blocks.size(), 4u);
  EXPECT_TRUE(ring.blocks[0].written);
  EXPECT_FALSE(ring.blocks[3].written);
  const auto unread = ring.unread_by_reader();
  ASSERT_EQ(unread.size(), 3u);
  EXPECT_TRUE(unread[0].empty());
  EXPECT_EQ(unread[1], (std::vector<int>{0, 2}));
  EXPECT_EQ(unread[2], (std::vector<int>{2}));
  EXPECT_FALSE(ring.all_read());
  EXPECT_TRUE(decode_ring("psm_test", layout, std::string(16, '\0')).all_read());
}

TEST(ShmRing, ForeignBytesAndShortMetadataAreRefusedWithTheReason) {
  const RingLayout layout{kMiB, 2, 1};
  try {
    decode_ring("psm_x", layout, std::string("\1\1\7\0", 4));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "psm_x: block 1 has flag byte 7 (vLLM's ring flags are 0 or 1): not its layout");
  }
  EXPECT_THROW(decode_ring("psm_x", layout, "\1"), Error);
}

TEST(ShmRing, BlockListsAreCompressed) {
  EXPECT_EQ(block_list({0, 1, 2, 3, 7}), "0-3,7");
  EXPECT_EQ(block_list({5}), "5");
  EXPECT_EQ(block_list({}), "");
}

// A real segment in /dev/shm, mapped here as a rank maps it, read back through map_files.
TEST(ShmRing, ASegmentMappedByAProcessIsReadThroughItsMapping) {
  const std::string name = "psm_hangscope_test_" + std::to_string(::getpid());
  const std::string path = "/dev/shm/" + name;
  const RingLayout layout{kMiB, 10, 2};
  const std::uint64_t size = ring_size(kMiB, 10, 2);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(size)), 0);
  auto* base =
      static_cast<unsigned char*>(::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  ::close(fd);
  ::unlink(path.c_str());  // as vLLM's creator does at exit: the mapping stays readable
  ASSERT_NE(base, MAP_FAILED);
  // Blocks 0-9 written; reader 1 read none of them, reader 0 all.
  for (std::uint64_t b = 0; b < 10; ++b) {
    base[layout.metadata_offset() + b * 3] = 1;
    base[layout.metadata_offset() + b * 3 + 1] = 1;
  }
  int error = 0;
  const auto map = proc::read_memory_map(::getpid(), &error);
  ASSERT_TRUE(map);
  const proc::Mapping* mapping = map->find(reinterpret_cast<std::uint64_t>(base));
  ASSERT_NE(mapping, nullptr);
  EXPECT_EQ(mapping->path, path);
  const auto ring = read_ring(::getpid(), mapping->start, mapping->end, mapping->path, 2);
  EXPECT_EQ(ring.name, name);
  EXPECT_EQ(ring.layout.n_reader, 2u);
  EXPECT_EQ(ring.unread_by_reader()[1], (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_TRUE(ring.unread_by_reader()[0].empty());
  ::munmap(base, size);
}

}  // namespace
}  // namespace hangscope::collectives
