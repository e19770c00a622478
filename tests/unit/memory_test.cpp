#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <cstring>

#include "hangscope/memory/memory_reader.h"
#include "hangscope/memory/process_memory.h"

namespace hangscope::memory {
namespace {

TEST(BufferMemory, ReadsInsideAndStopsAtTheEdges) {
  std::array<std::byte, 16> data{};
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>(i);
  BufferMemory mem(0x1000, data.data(), data.size());
  std::array<std::byte, 8> out{};
  EXPECT_EQ(mem.read(0x1004, out.data(), 8), 8u);
  EXPECT_EQ(out[0], std::byte{4});
  EXPECT_EQ(mem.read(0x100c, out.data(), 8), 4u);  // prefix only
  EXPECT_EQ(mem.read(0x0fff, out.data(), 8), 0u);
  EXPECT_EQ(mem.read(0x1010, out.data(), 1), 0u);
  EXPECT_FALSE(mem.read_value<std::uint64_t>(0x100c));
  EXPECT_TRUE(mem.contains(0x1008, 8));
  EXPECT_FALSE(mem.contains(0x1009, 8));
}

TEST(ProcessMemory, ReadsLiveMemoryOfAProcess) {
  const std::uint64_t secret = 0x1122334455667788;
  ProcessMemory mem(::getpid());
  EXPECT_EQ(mem.read_value<std::uint64_t>(reinterpret_cast<std::uint64_t>(&secret)), secret);
  EXPECT_EQ(mem.read(0, nullptr, 0), 0u);
  std::uint64_t value;
  EXPECT_FALSE(mem.read_exact(8, &value, sizeof value));  // page 0 is never mapped
}

TEST(ProcessMemory, ReadStopsAtAnUnmappedPage) {
  const long page = ::sysconf(_SC_PAGESIZE);
  auto* area =
      static_cast<char*>(::mmap(nullptr, static_cast<std::size_t>(2 * page), PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(area, MAP_FAILED);
  std::memset(area, 'x', static_cast<std::size_t>(page));
  ASSERT_EQ(::munmap(area + page, static_cast<std::size_t>(page)), 0);
  ProcessMemory mem(::getpid());
  std::array<char, 64> out{};
  EXPECT_EQ(mem.read(reinterpret_cast<std::uint64_t>(area + page - 16), out.data(), out.size()),
            16u);
  ::munmap(area, static_cast<std::size_t>(page));
}

TEST(ProcessMemory, BatchedReadsSurviveAFaultInTheMiddle) {
  const std::uint64_t a = 1, c = 3;
  std::uint64_t out_a = 0, out_b = 0, out_c = 0;
  std::array<ReadRequest, 3> requests{{{reinterpret_cast<std::uint64_t>(&a), &out_a, 8, 0},
                                       {16, &out_b, 8, 0},
                                       {reinterpret_cast<std::uint64_t>(&c), &out_c, 8, 0}}};
  ProcessMemory(::getpid()).read_many(requests);
  EXPECT_EQ(requests[0].copied, 8u);
  EXPECT_EQ(out_a, 1u);
  EXPECT_EQ(requests[1].copied, 0u);
  EXPECT_EQ(requests[2].copied, 8u);
  EXPECT_EQ(out_c, 3u);
}

TEST(ProcessMemory, MissingProcessReadsNothing) {
  ProcessMemory mem(0x7ffffff0);
  std::uint64_t value;
  EXPECT_EQ(mem.read(reinterpret_cast<std::uint64_t>(&value), &value, sizeof value), 0u);
}

}  // namespace
}  // namespace hangscope::memory
