// The one interface through which hangscope reads a target's memory: live process, copy or file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <type_traits>

#include "hangscope/memory/field_offset.h"

namespace hangscope::memory {

// One piece of a batched read.
struct ReadRequest {
  std::uint64_t address = 0;
  void* out = nullptr;
  std::size_t size = 0;
  std::size_t copied = 0;  // filled in by read_many
};

class MemoryReader {
 public:
  virtual ~MemoryReader() = default;

  // Copies up to `size` bytes at `address` into `out`; returns how many bytes were copied
  // (a prefix: reading stops at the first unreadable byte).
  virtual std::size_t read(std::uint64_t address, void* out, std::size_t size) = 0;

  // Several reads, each as `read` does it, with as few system calls as the reader allows.
  virtual void read_many(std::span<ReadRequest> requests) {
    for (auto& r : requests) r.copied = read(r.address, r.out, r.size);
  }

  bool read_exact(std::uint64_t address, void* out, std::size_t size) {
    return read(address, out, size) == size;
  }

  template <typename T>
  std::optional<T> read_value(std::uint64_t address) {
    static_assert(std::is_trivially_copyable_v<T>);
    T value;
    if (!read_exact(address, &value, sizeof value)) return std::nullopt;
    return value;
  }

  // The field of the object at `object`, typed by its offset: a FieldOffset<std::int32_t>
  // reads an std::int32_t. nullopt when any of its bytes is unreadable.
  template <typename T>
  std::optional<T> read_field(std::uint64_t object, FieldOffset<T> field) {
    return read_value<T>(field.in(object));
  }
};

// A copy of one region of a target's memory, addressed as in the target.
class BufferMemory final : public MemoryReader {
 public:
  BufferMemory(std::uint64_t base, const std::byte* data, std::size_t size)
      : base_(base), data_(data), size_(size) {}

  std::size_t read(std::uint64_t address, void* out, std::size_t size) override {
    if (address < base_ || address - base_ >= size_) return 0;
    const std::size_t offset = address - base_;
    const std::size_t n = size < size_ - offset ? size : size_ - offset;
    std::memcpy(out, data_ + offset, n);
    return n;
  }

  bool contains(std::uint64_t address, std::size_t size) const {
    return address >= base_ && address - base_ <= size_ && size <= size_ - (address - base_);
  }

 private:
  std::uint64_t base_;
  const std::byte* data_;
  std::size_t size_;
};

}  // namespace hangscope::memory
