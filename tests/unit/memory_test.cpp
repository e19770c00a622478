#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <cstring>

#include "hangscope/memory/memory_reader.h"
#include "hangscope/memory/page_cache.h"
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

// A reader that counts the calls that reach it.
class CountingReader final : public MemoryReader {
 public:
  explicit CountingReader(MemoryReader& inner) : inner_(inner) {}
  std::size_t read(std::uint64_t address, void* out, std::size_t size) override {
    ++reads;
    return inner_.read(address, out, size);
  }
  void read_many(std::span<ReadRequest> requests) override {
    ++batches;
    requests_seen += requests.size();
    MemoryReader::read_many(requests);  // each as read() does it (counted there too)
  }
  int reads = 0, batches = 0;
  std::size_t requests_seen = 0;

 private:
  MemoryReader& inner_;
};

// Batched reads through a page cache: what lies in pages it keeps is copied from them, the rest
// reaches the inner reader as one batch (and is not kept); a prefix where memory ends.
TEST(PageCache, BatchedReadsUseKeptPagesAndPassTheRestInOneBatch) {
  std::array<std::byte, 3 * PageCache::kPageSize> data{};
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>(i % 251);
  const std::uint64_t base = 0x10000;
  BufferMemory buffer(base, data.data(), data.size());
  CountingReader counting(buffer);
  PageCache cache(counting);
  std::byte one{};
  ASSERT_EQ(cache.read(base + 5, &one, 1), 1u);  // page 0 kept
  EXPECT_EQ(counting.reads, 1);
  std::array<std::byte, 8> a{}, b{}, c{}, d{};
  std::array<ReadRequest, 4> requests{{{base + 10, a.data(), 8, 0},
                                       {base + PageCache::kPageSize + 3, b.data(), 8, 0},
                                       {base + 2 * PageCache::kPageSize + 7, c.data(), 8, 0},
                                       {base + data.size() - 4, d.data(), 8, 0}}};
  cache.read_many(requests);
  EXPECT_EQ(counting.batches, 1);
  EXPECT_EQ(counting.requests_seen, 3u);  // the first came from the kept page
  EXPECT_EQ(requests[0].copied, 8u);
  EXPECT_EQ(a[0], static_cast<std::byte>(10));
  EXPECT_EQ(requests[1].copied, 8u);
  EXPECT_EQ(b[0], static_cast<std::byte>((PageCache::kPageSize + 3) % 251));
  EXPECT_EQ(requests[2].copied, 8u);
  EXPECT_EQ(c[0], static_cast<std::byte>((2 * PageCache::kPageSize + 7) % 251));
  EXPECT_EQ(requests[3].copied, 4u);  // memory ends
  EXPECT_EQ(cache.pages_read(), 1u);  // batched reads are not kept
}

TEST(ProcessMemory, MissingProcessReadsNothing) {
  ProcessMemory mem(0x7ffffff0);
  std::uint64_t value;
  EXPECT_EQ(mem.read(reinterpret_cast<std::uint64_t>(&value), &value, sizeof value), 0u);
}

}  // namespace
}  // namespace hangscope::memory
