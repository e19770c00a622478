#include "hangscope/memory/page_cache.h"

#include <algorithm>
#include <cstring>

namespace hangscope::memory {

const PageCache::Page& PageCache::page(std::uint64_t base) {
  if (const auto it = pages_.find(base); it != pages_.end()) return it->second;
  if (pages_.size() >= max_pages_) pages_.clear();
  Page page;
  page.bytes.resize(kPageSize);
  page.bytes.resize(inner_.read(base, page.bytes.data(), kPageSize));
  ++pages_read_;
  return pages_.emplace(base, std::move(page)).first->second;
}

void PageCache::read_many(std::span<ReadRequest> requests) {
  std::vector<ReadRequest> missing;
  std::vector<std::size_t> where;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    auto& r = requests[i];
    const std::uint64_t base = r.address & ~static_cast<std::uint64_t>(kPageSize - 1);
    const auto it = pages_.find(base);
    const std::size_t offset = static_cast<std::size_t>(r.address - base);
    if (it != pages_.end() && offset + r.size <= it->second.bytes.size()) {
      std::memcpy(r.out, it->second.bytes.data() + offset, r.size);
      r.copied = r.size;
      continue;
    }
    missing.push_back(r);
    where.push_back(i);
  }
  if (missing.empty()) return;
  inner_.read_many(missing);
  for (std::size_t j = 0; j < missing.size(); ++j) requests[where[j]].copied = missing[j].copied;
}

std::size_t PageCache::read(std::uint64_t address, void* out, std::size_t size) {
  if (size > 4 * kPageSize) return inner_.read(address, out, size);
  auto* dest = static_cast<std::byte*>(out);
  std::size_t copied = 0;
  while (copied < size) {
    const std::uint64_t at = address + copied;
    const std::uint64_t base = at & ~static_cast<std::uint64_t>(kPageSize - 1);
    const Page& p = page(base);
    const std::size_t offset = static_cast<std::size_t>(at - base);
    if (offset >= p.bytes.size()) break;  // unreadable from here
    const std::size_t n = std::min(size - copied, p.bytes.size() - offset);
    std::memcpy(dest + copied, p.bytes.data() + offset, n);
    copied += n;
    if (p.bytes.size() < kPageSize && offset + n == p.bytes.size()) break;
  }
  return copied;
}

}  // namespace hangscope::memory
