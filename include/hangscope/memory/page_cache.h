// A MemoryReader in front of another that reads whole pages and keeps them: the Python frame
// walk reads many small, nearby fields (frames, code objects, strings), one system call each
// without it. Holds one instant's view: make a new one for each read of a running process.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "hangscope/memory/memory_reader.h"

namespace hangscope::memory {

class PageCache final : public MemoryReader {
 public:
  static constexpr std::size_t kPageSize = 4096;

  // At most `max_pages` are kept (then the cache starts over); reads larger than 4 pages go
  // straight to `inner`.
  explicit PageCache(MemoryReader& inner, std::size_t max_pages = 8192)
      : inner_(inner), max_pages_(max_pages) {}

  std::size_t read(std::uint64_t address, void* out, std::size_t size) override;
  // Requests within pages kept are copied from them; the others are read together through
  // inner's read_many (one system call for many small scattered reads), not kept.
  void read_many(std::span<ReadRequest> requests) override;

  std::size_t pages_read() const { return pages_read_; }

 private:
  struct Page {
    std::vector<std::byte> bytes;  // shorter than a page where the mapping ends
  };
  const Page& page(std::uint64_t base);

  MemoryReader& inner_;
  std::size_t max_pages_;
  std::size_t pages_read_ = 0;
  std::unordered_map<std::uint64_t, Page> pages_;
};

}  // namespace hangscope::memory
